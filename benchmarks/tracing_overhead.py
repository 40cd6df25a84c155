"""What tracing costs the gateway: 64 concurrent streams, tracing off and on, side by side.

Two gateways in ``ids`` mode (render, incremental encode, ids upstream) sit in front of one
trivial streaming upstream (``trivial_upstream.py``, its own process); one traces and exports
its spans over OTLP/HTTP to a local sink (the same script, another process, which counts what
it receives). Every request carries a ``traceparent``, as the probe's and the bench's do, so
the traced gateway continues the client's trace: 6 spans a request. Rounds alternate which
gateway goes first; each round sends ``--requests`` chats through 64 concurrent streams.

Figures: requests a second, client TTFT (first content event) p50/p99, and the gateway's
CPU per request (user + system, from /proc), for each; the sink's span count. Also, in this
process, what the off path adds per request to the hot path (reading the trace headers, and
the stages' look-ups that find tracing off), in nanoseconds. The last line is JSON.

    python benchmarks/tracing_overhead.py            # 4 rounds of 2,048 requests
    python benchmarks/tracing_overhead.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import trivial_upstream
from gateway_hop import _free_port, cpu_s, gateway
from trivial_upstream import started

from ttftscope.gateway.hoptrace import begin, traced
from ttftscope.localserver.model import model_dir
from ttftscope.tracing.context import new_context

STREAMS = 64
BODY = json.dumps(
    {
        "model": "trivial",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
    }
).encode()


async def _one(session: aiohttp.ClientSession, url: str) -> float:
    headers = {"content-type": "application/json", **new_context().headers()}
    t0 = time.perf_counter()
    async with session.post(url, data=BODY, headers=headers) as resp:
        events, at = 0, None
        async for chunk in resp.content.iter_any():
            events += chunk.count(b"\n\n")
            if at is None and events >= 2:
                at = time.perf_counter()
    if resp.status != 200 or at is None:
        raise SystemExit(f"{url}: HTTP {resp.status}")
    return (at - t0) * 1000


async def _round(base: str, requests: int) -> tuple[list[float], float]:
    """``requests`` chats over ``STREAMS`` concurrent streams: TTFTs (ms) and wall seconds."""
    url = base + "/v1/chat/completions"
    left = iter(range(requests))
    ttfts: list[float] = []
    conn = aiohttp.TCPConnector(limit=STREAMS)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def worker() -> None:
            for _ in left:
                ttfts.append(await _one(session, url))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(STREAMS)))
        return ttfts, time.perf_counter() - t0


def off_path_ns(loops: int = 200_000) -> dict[str, float]:
    """Per request, what the off path adds: reading the headers and 4 stage look-ups."""
    plain = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    plain += [(b"content-length", b"120"), (b"accept", b"*/*"), (b"user-agent", b"x")]
    with_tp = [*plain, (b"traceparent", new_context().traceparent.encode())]

    def off(headers: list[tuple[bytes, bytes]]) -> float:
        def once() -> None:
            begin(headers, on=False)
            traced(), traced(), traced(), traced()

        return timeit.timeit(once, number=loops) / loops * 1e9

    return {
        "off_path_ns_no_trace_headers": round(off(plain), 1),
        "off_path_ns_with_traceparent": round(off(with_tp), 1),
    }


def measure(urls: dict[str, str], pids: dict[str, int], rounds: int, requests: int) -> Any:
    ttfts: dict[str, list[float]] = {name: [] for name in urls}
    wall = dict.fromkeys(urls, 0.0)
    cpu = dict.fromkeys(urls, 0.0)
    names = list(urls)
    for name in names:  # warm-up: connections, caches, the first encodes
        asyncio.run(_round(urls[name], STREAMS * 2))
    for i in range(rounds):
        for name in names[i % 2 :] + names[: i % 2]:
            c0 = cpu_s(pids[name])
            got, seconds = asyncio.run(_round(urls[name], requests))
            cpu[name] += cpu_s(pids[name]) - c0
            ttfts[name] += got
            wall[name] += seconds
    return ttfts, wall, cpu


def _q(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2048, help="requests a round and gateway")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 256 requests")
    ap.add_argument("--model-dir", type=Path, help="tokenizer + template (default: tiny model)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.requests = 2, 256
    up_port, sink_port = _free_port(), _free_port()
    up, sink = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{sink_port}"
    folder = args.model_dir or model_dir()
    off_cmd, off_url = gateway(up + "/v1", "ids", folder)
    on_cmd, on_url = gateway(up + "/v1", "ids", folder)
    on_cmd = ["env", f"OTEL_EXPORTER_OTLP_ENDPOINT={sink}", *on_cmd]
    serve = [sys.executable, trivial_upstream.__file__]
    with (
        started([*serve, str(up_port)], up + "/v1/models"),
        started([*serve, str(sink_port)], sink + "/v1/models"),
        started(off_cmd, off_url + "/health") as off_gw,
        started(on_cmd, on_url + "/health") as on_gw,
    ):
        print(f"upstream {up}; sink {sink}; gateways: off {off_url}, on {on_url}")
        urls, pids = {"off": off_url, "on": on_url}, {"off": off_gw.pid, "on": on_gw.pid}
        ttfts, wall, cpu = measure(urls, pids, args.rounds, args.requests)
        time.sleep(6)  # the batch processor sends every 5 s
        received = httpx.get(sink + "/sink").json()
    total = args.rounds * args.requests
    result: dict[str, Any] = {"streams": STREAMS, "requests_per_mode": total}
    print(f"{STREAMS} streams, {total} requests per gateway, {args.rounds} rounds")
    print(f"{'':4} {'req/s':>8} {'ttft p50':>9} {'ttft p99':>9} {'cpu ms/req':>11}")
    for name in urls:
        row = {
            "req_per_s": round(total / wall[name], 1),
            "ttft_ms_p50": round(statistics.median(ttfts[name]), 3),
            "ttft_ms_p99": round(_q(ttfts[name], 99), 3),
            "cpu_ms_per_request": round(cpu[name] * 1000 / total, 4),
        }
        result.update({f"{name}_{k}": v for k, v in row.items()})
        print(
            f"{name:4} {row['req_per_s']:>8} {row['ttft_ms_p50']:>9} {row['ttft_ms_p99']:>9} "
            f"{row['cpu_ms_per_request']:>11}"
        )
    result["cpu_ratio_on_off"] = round(
        result["on_cpu_ms_per_request"] / result["off_cpu_ms_per_request"], 3
    )
    result["ttft_p50_on_minus_off_ms"] = round(
        result["on_ttft_ms_p50"] - result["off_ttft_ms_p50"], 3
    )
    result["sink_posts"], result["sink_bytes"] = received["posts"], received["bytes"]
    result.update(off_path_ns())
    print(
        f"on/off CPU per request: {result['cpu_ratio_on_off']}x; sink got "
        f"{received['posts']} exports, {received['bytes']} bytes"
    )
    print(
        f"off path per request: {result['off_path_ns_no_trace_headers']} ns "
        f"({result['off_path_ns_with_traceparent']} ns with a traceparent to pass on)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
