"""What tracing costs the gateway: 64 concurrent streams, tracing off, on, and on the SDK's path.

Three gateways in ``ids`` mode (render, incremental encode, ids upstream) sit in front of one
trivial streaming upstream (``trivial_upstream.py``, its own process): ``off`` does not trace,
``on`` exports its spans as the gateway does (our encoder, on a thread of its own), ``on_sdk``
through the OpenTelemetry SDK's batch processor and exporter (``TTFTSCOPE_OTLP_EXPORTER=sdk``,
what every traced gateway did before). Each traced one exports over OTLP/HTTP to a sink of its
own (the same script, another process, which counts the posts, bytes and spans it receives).
Every request carries a ``traceparent``, as the probe's and the bench's do, so a traced
gateway continues the client's trace: 6 spans a request. Rounds rotate which gateway goes
first; each round sends ``--requests`` chats through 64 concurrent streams.

Figures: requests a second, client TTFT (first content event) p50/p99, and the gateway's
CPU per request (user + system, from /proc), for each, and how it splits between the event
loop's thread and the others (the exporter, the work pool); what tracing adds to the CPU per
request (``tracing_cpu_us_per_request``: on − off, in microseconds;
``tracing_cpu_us_sdk_per_request``: on_sdk − off);
each sink's counts. Also, in this process, what the off path adds per request to the hot path
(reading the trace headers, and the stages' look-ups that find tracing off), in nanoseconds,
and the CPU of each stage of a traced request on both paths (``tracing_stages.py``). The last
line is JSON.

    python benchmarks/tracing_overhead.py            # 4 rounds of 2,048 requests
    python benchmarks/tracing_overhead.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import timeit
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import trivial_upstream
from gateway_hop import _free_port, cpu_s, gateway
from tracing_stages import print_stages, stage_cpu_us
from trivial_upstream import started

from ttftscope.gateway.transport.hoptrace import begin, traced
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


def threads_cpu_s(pid: int) -> tuple[float, float]:
    """User + system CPU seconds so far of process ``pid``'s main thread (its event loop),
    and of its other threads together (the exporter, the work pool)."""
    main = other = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            seconds = cpu_s(pid, f"/task/{tid}")
        except OSError:  # a thread that ended
            continue
        if int(tid) == pid:
            main = seconds
        else:
            other += seconds
    return main, other


def measure(urls: dict[str, str], pids: dict[str, int], rounds: int, requests: int) -> Any:
    ttfts: dict[str, list[float]] = {name: [] for name in urls}
    wall = dict.fromkeys(urls, 0.0)
    cpu = {name: [0.0, 0.0, 0.0] for name in urls}  # the process, its main thread, the rest
    names = list(urls)
    for name in names:  # warm-up: connections, caches, the first encodes
        asyncio.run(_round(urls[name], STREAMS * 2))
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            c0 = (cpu_s(pids[name]), *threads_cpu_s(pids[name]))
            got, seconds = asyncio.run(_round(urls[name], requests))
            c1 = (cpu_s(pids[name]), *threads_cpu_s(pids[name]))
            cpu[name] = [acc + b - a for acc, a, b in zip(cpu[name], c0, c1, strict=True)]
            ttfts[name] += got
            wall[name] += seconds
    return ttfts, wall, cpu


def _q(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _row(total: int, ttfts: list[float], wall: float, cpu: list[float]) -> dict[str, float]:
    return {
        "req_per_s": round(total / wall, 1),
        "ttft_ms_p50": round(statistics.median(ttfts), 3),
        "ttft_ms_p99": round(_q(ttfts, 99), 3),
        "cpu_ms_per_request": round(cpu[0] * 1000 / total, 4),
        "loop_thread_cpu_us": round(cpu[1] * 1e6 / total, 1),
        "other_threads_cpu_us": round(cpu[2] * 1e6 / total, 1),
    }


def run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The three gateways measured: the JSON fields, and each sink's counts."""
    up_port = _free_port()
    up = f"http://127.0.0.1:{up_port}"
    sinks = {name: _free_port() for name in ("on", "on_sdk")}
    folder = args.model_dir or model_dir()
    cmds, urls = {}, {}
    for name in ("off", "on", "on_sdk"):
        cmds[name], urls[name] = gateway(up + "/v1", "ids", folder)
    for name, port in sinks.items():
        env = [f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{port}"]
        env += ["TTFTSCOPE_OTLP_EXPORTER=sdk"] if name == "on_sdk" else []
        cmds[name] = ["env", *env, *cmds[name]]
    serve = [sys.executable, trivial_upstream.__file__]
    with ExitStack() as stack:
        stack.enter_context(started([*serve, str(up_port)], up + "/v1/models"))
        for port in sinks.values():
            sink = f"http://127.0.0.1:{port}"
            stack.enter_context(started([*serve, str(port)], sink + "/v1/models"))
        pids = {n: stack.enter_context(started(cmds[n], urls[n] + "/health")).pid for n in urls}
        print(f"upstream {up}; gateways: " + ", ".join(f"{n} {u}" for n, u in urls.items()))
        ttfts, wall, cpu = measure(urls, pids, args.rounds, args.requests)
        time.sleep(6)  # the batch processors send every 5 s
        got = {n: httpx.get(f"http://127.0.0.1:{p}/sink").json() for n, p in sinks.items()}
    total = args.rounds * args.requests
    result: dict[str, Any] = {"streams": STREAMS, "requests_per_mode": total}
    for name in urls:
        row = _row(total, ttfts[name], wall[name], cpu[name])
        result.update({f"{name}_{k}": v for k, v in row.items()})
    return result, got


COLUMNS = (
    ("req/s", "req_per_s", 8),
    ("ttft p50", "ttft_ms_p50", 9),
    ("ttft p99", "ttft_ms_p99", 9),
    ("cpu ms/req", "cpu_ms_per_request", 11),
    ("loop us", "loop_thread_cpu_us", 8),
    ("others us", "other_threads_cpu_us", 9),
)


def _print_table(result: dict[str, Any]) -> None:
    print(f"{'':6}" + "".join(f" {title:>{w}}" for title, _, w in COLUMNS))
    for name in ("off", "on", "on_sdk"):
        print(f"{name:6}" + "".join(f" {result[f'{name}_{k}']:>{w}}" for _, k, w in COLUMNS))


def _derived(result: dict[str, Any], sinks: dict[str, Any]) -> None:
    """What tracing adds, from the rows; what each sink received."""
    off = result["off_cpu_ms_per_request"]
    for name, key in (("on", "tracing_cpu_us"), ("on_sdk", "tracing_cpu_us_sdk")):
        result[key + "_per_request"] = round((result[f"{name}_cpu_ms_per_request"] - off) * 1000, 1)
    result["cpu_ratio_on_off"] = round(result["on_cpu_ms_per_request"] / off, 3)
    result["ttft_p50_on_minus_off_ms"] = round(
        result["on_ttft_ms_p50"] - result["off_ttft_ms_p50"], 3
    )
    warm = STREAMS * 2  # the warm-up requests are traced too
    result["spans_sent"] = 6 * (result["requests_per_mode"] + warm)
    for name, got in sinks.items():
        prefix = "sink" if name == "on" else "sink_sdk"
        result.update({f"{prefix}_{k}": v for k, v in got.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2048, help="requests a round and gateway")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 256 requests")
    ap.add_argument("--model-dir", type=Path, help="tokenizer + template (default: tiny model)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.requests = 2, 256
    result, sinks = run(args)
    print(f"{STREAMS} streams, {result['requests_per_mode']} requests per gateway, ", end="")
    print(f"{args.rounds} rounds")
    _print_table(result)
    _derived(result, sinks)
    print(
        f"tracing adds {result['tracing_cpu_us_per_request']} us of gateway CPU a request "
        f"({result['tracing_cpu_us_sdk_per_request']} us on the SDK's path); sinks got "
        f"{result['sink_spans']} and {result['sink_sdk_spans']} of {result['spans_sent']} spans"
    )
    result.update(off_path_ns())
    print(
        f"off path per request: {result['off_path_ns_no_trace_headers']} ns "
        f"({result['off_path_ns_with_traceparent']} ns with a traceparent to pass on)"
    )
    result["stages_us"] = stage_cpu_us()
    print_stages(result["stages_us"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
