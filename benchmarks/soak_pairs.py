"""The soak benchmark's small chats, in pairs: each sent at the same instant to the gateway and
straight to its upstream, and the figures of a phase's pairs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

SMALL_MODEL = "small"  # the small chats', on a fake upstream of their own
SMALL = orjson.dumps({"model": SMALL_MODEL, "messages": [{"role": "user", "content": "hi"}]})
JSON = {"content-type": "application/json"}


@dataclass
class Pairs:
    """Small chats sent at the same instant to the gateway and straight to its upstream: the
    latencies (ms) of the pairs whose two answers both came, and the failures of each side."""

    gateway: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    gateway_failed: int = 0
    direct_failed: int = 0


async def _timed(client: aiohttp.ClientSession, url: str) -> float | None:
    t0 = time.perf_counter()
    try:
        async with client.post(url, data=SMALL, headers=JSON) as resp:
            await resp.read()
            ok = resp.status == 200
    except aiohttp.ClientError:
        ok = False
    return (time.perf_counter() - t0) * 1000 if ok else None


async def small_chats(
    client: aiohttp.ClientSession,
    urls: tuple[str, str],
    every_s: float,
    stop: asyncio.Event,
    out: Pairs,
) -> None:
    """One pair of small chats (gateway, direct) every ``every_s`` until ``stop``."""
    pending: set[asyncio.Task[None]] = set()

    async def pair() -> None:
        via, direct = await asyncio.gather(_timed(client, urls[0]), _timed(client, urls[1]))
        out.gateway_failed += via is None
        out.direct_failed += direct is None
        if via is not None and direct is not None:
            out.gateway.append(via)
            out.direct.append(direct)

    while not stop.is_set():
        task = asyncio.create_task(pair())
        pending.add(task)
        task.add_done_callback(pending.discard)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
    await asyncio.gather(*pending)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else 0.0


def figures(pairs: Pairs) -> dict[str, Any]:
    """A phase's figures: each side's p50 and p99, and what the gateway adds at the p99 (its
    p99 minus the direct p99 of the same pairs, and the p99 of each pair's difference).

    >>> figures(Pairs(gateway=[5.0, 7.0, 9.0], direct=[1.0, 2.0, 8.0]))["gateway_added_p99_ms"]
    1.08
    """
    via, direct = pairs.gateway, pairs.direct
    added = [g - d for g, d in zip(via, direct, strict=True)]
    return {
        "pairs": len(via),
        "gateway_p50_ms": round(statistics.median(via), 2) if via else None,
        "gateway_p99_ms": round(p99(via), 2),
        "direct_p50_ms": round(statistics.median(direct), 2) if direct else None,
        "direct_p99_ms": round(p99(direct), 2),
        "gateway_added_p99_ms": round(p99(via) - p99(direct), 2),
        "paired_added_p99_ms": round(p99(added), 2),
        "gateway_max_ms": round(max(via, default=0.0), 2),
        "gateway_failed": pairs.gateway_failed,
        "direct_failed": pairs.direct_failed,
    }


def compare(runs: list[dict[str, Any]]) -> None:
    """After several runs: one line per configuration with each round's headline figures."""
    for config in dict.fromkeys(r["config"] for r in runs):
        mine = [r for r in runs if r["config"] == config]
        added = [r["gateway_added_p99_cold_ms"] for r in mine]
        line = {
            "summary": True,
            "config": config,
            "rounds": len(mine),
            "gateway_added_p99_cold_ms": added,
            "gateway_added_p99_cold_ms_median": round(statistics.median(added), 2),
            "gateway_p99_cold_ms": [r["gateway_p99_cold_ms"] for r in mine],
            "direct_p99_cold_ms": [r["direct_p99_cold_ms"] for r in mine],
            "gateway_added_p99_idle_ms": [r["gateway_added_p99_idle_ms"] for r in mine],
            "cold_phase_s": [r["cold_phase_s"] for r in mine],
            "rss_over_cache_mb": [r["rss_over_cache_mb"] for r in mine],
            "mismatches": sum(r["mismatches"] for r in mine),
        }
        print(json.dumps(line), flush=True)
