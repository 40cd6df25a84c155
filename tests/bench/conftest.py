"""Shared helpers: a fault server with streaming delays, endpoints on it, a bench runner."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope.bench.hooks import Hooks
from ttftscope.bench.options import BenchOptions, ContextSizes
from ttftscope.bench.runner import BenchRun, run_bench
from ttftscope.client.endpoint import Endpoint

# Small sessions that finish fast: 200-token contexts (counted as 4 characters a token),
# no think time, no warmups, and the default target.
FAST = BenchOptions(
    sessions=4,
    context_tokens=ContextSizes("list", (200,)),
    num_prompts=12,
    think_time_s=0.0,
    num_warmups=0,
    drain_s=5.0,
)


@pytest.fixture
def fault() -> Iterator[FaultServer]:
    """A fault server whose streams take ~40 ms (first token 20 ms, then 10 ms a chunk)."""
    with FaultServer(FaultOptions(first_content_delay_s=0.02, chunk_delay_s=0.01)) as srv:
        yield srv


def endpoint(
    srv: FaultServer, scenario: str = "normal", metrics_url: str | None = None
) -> Endpoint:
    base = srv.base_url(scenario)
    return Endpoint(
        base_url=base,
        metrics_url=metrics_url or base.removesuffix("/v1") + "/metrics",
        model="tiny-llama",
        timeout_s=10,
        max_tokens=4,
    )


def quarter(text: str) -> int:
    return len(text) // 4


def run(
    ep: Endpoint,
    opts: BenchOptions,
    result_dir: Path,
    hooks: Hooks | None = None,
    **changes: object,
) -> BenchRun:
    """One bench run (``changes`` replace fields of ``opts``), contexts counted locally."""
    opts = dataclasses.replace(opts, **changes)  # type: ignore[arg-type]
    return asyncio.run(
        run_bench(ep, opts, result_dir=result_dir, count_tokens=quarter, hooks=hooks)
    )
