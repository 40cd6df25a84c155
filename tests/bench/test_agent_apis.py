"""``--api messages|responses``: whole runs send each API's own body to its path and record
the server's usage, on the in-process fault server (which answers both APIs)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from rich.console import Console

from tests.bench.conftest import FAST, endpoint, run
from tests.faultserver import FaultServer
from ttftscope.bench.output.table import print_bench_summary
from ttftscope.client.apis import API_PATHS, Api

LIMIT = {"chat": "max_tokens", "messages": "max_tokens", "responses": "max_output_tokens"}


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_run_speaks_the_api_it_is_given(fault: FaultServer, tmp_path: Path, api: Api) -> None:
    ep = dataclasses.replace(endpoint(fault), api_key="sk-bench-key")
    done = run(ep, FAST, tmp_path, api=api, sessions=2, num_prompts=6, extra_body={"top_k": 3})
    posts = [r for r in fault.requests if r.method == "POST"]
    assert posts and all(r.path.endswith("/v1" + API_PATHS[api]) for r in posts)
    for body in (r.json() for r in posts):
        assert body[LIMIT[api]] == 216 and body["stream"] is True and body["top_k"] == 3
        assert "stream_options" not in body and body["model"] == "tiny-llama"
    if api == "messages":
        assert {r.headers["anthropic-version"] for r in posts} == {"2023-06-01"}
        assert {r.headers["x-api-key"] for r in posts} == {"sk-bench-key"}
    else:
        assert all(r.json()["store"] is False for r in posts)
    s = done.summary
    assert s["api"] == api and s["completed"] == 6 and s["failed"] == 0
    assert s["total_input_tokens"] == 6 * 11  # the fault server counts 11 input tokens
    for rec in done.records:
        assert rec.ok and rec.variant == api and rec.prompt_tokens == 11
        assert rec.client_ttft_ms and rec.first_event_ms and rec.content_chunks == 1
        assert rec.first_event_ms <= rec.client_ttft_ms
    out = io.StringIO()
    print_bench_summary(s, Console(file=out, width=80))
    assert f"{api} API" in out.getvalue()


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_max_tokens_replaces_the_traces_median_in_every_api(
    fault: FaultServer, tmp_path: Path, api: Api
) -> None:
    run(endpoint(fault), FAST, tmp_path, api=api, sessions=1, num_prompts=2, max_tokens=5)
    posts = [r.json() for r in fault.requests if r.method == "POST"]
    assert len(posts) == 2 and {b[LIMIT[api]] for b in posts} == {5}
