"""What the gateway's hop costs, without vLLM's own variance: a trivial upstream behind it.

The upstream (``trivial_upstream.py``, its own process) answers every chat request at once
with a role chunk, 4 content chunks, usage and ``[DONE]``, each its own write as vLLM sends
them, and answers the gateway's start-up probe for ``chat-ids`` the way vLLM 0.32 does. Requests
alternate (rotating who goes first): straight to the upstream, through the gateway in
``ids`` mode (render, incremental encode, ids in the body) and in ``text`` mode (pure
pass-through). TTFT is the time to the first content event, measured by the client.

On vLLM the same hop sits inside a 25 ms TTFT whose spread is several ms, so
``benchmarks/gateway_ab.py`` needs hundreds of pairs to see it; here it shows in one run.
Prints figures; the last line is JSON: ``ids_overhead_ms_p50``, ``text_overhead_ms_p50``
(gateway p50 minus direct p50), their paired medians, and the gateway's CPU time per request.

    python benchmarks/gateway_hop.py --pairs 500
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import httpx
import trivial_upstream
from trivial_upstream import started

from ttftscope.localserver.model import model_dir

BODY = {
    "model": "trivial",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 4,
    "stream": True,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gateway(upstream: str, mode: str, folder: Path) -> tuple[list[str], str]:
    """The command of a gateway in front of ``upstream``, and its base URL."""
    port = _free_port()
    cmd = [sys.executable, "-c", "from ttftscope.cli import main; main()", "gateway"]
    cmd += ["--upstream", upstream, "--mode", mode, "--port", str(port)]
    if mode == "ids":
        cmd += ["--model-dir", str(folder)]
    return cmd, f"http://127.0.0.1:{port}"


def ttft_ms(client: httpx.Client, base: str) -> float:
    """Time to the first content event (the one after the role chunk)."""
    t0 = time.perf_counter()
    with client.stream("POST", base + "/v1/chat/completions", json=BODY) as resp:
        events, at = 0, None
        for chunk in resp.iter_raw():
            events += chunk.count(b"\n\n")
            if at is None and events >= 2:
                at = time.perf_counter()
    if resp.status_code != 200 or at is None:
        raise SystemExit(f"{base}: HTTP {resp.status_code}")
    return (at - t0) * 1000


def cpu_s(pid: int, task: str = "") -> float:
    """User + system CPU seconds of process ``pid`` so far (``task``: ``/task/<tid>``, one
    of its threads)."""
    fields = Path(f"/proc/{pid}{task}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(urls: dict[str, str], pairs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in urls}
    names = list(urls)
    with httpx.Client(timeout=30) as client:
        for i in range(pairs + 50):  # 50 warm-up rounds: connections, caches
            for name in names[i % len(names) :] + names[: i % len(names)]:
                ms = ttft_ms(client, urls[name])
                if i >= 50:
                    times[name].append(ms)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=500, help="measured rounds")
    ap.add_argument(
        "--model-dir", type=Path, help="tokenizer + chat template (default: the tiny model's)"
    )
    args = ap.parse_args()
    up_port = _free_port()
    up = f"http://127.0.0.1:{up_port}"
    folder = args.model_dir or model_dir()
    ids_cmd, ids_url = gateway(up + "/v1", "ids", folder)
    text_cmd, text_url = gateway(up + "/v1", "text", folder)
    with (
        started([sys.executable, trivial_upstream.__file__, str(up_port)], up + "/v1/models"),
        started(ids_cmd, ids_url + "/health") as ids_gw,
        started(text_cmd, text_url + "/health"),
    ):
        api = "chat-ids" if 'api="chat-ids"' in httpx.get(ids_url + "/metrics").text else "none"
        print(f"upstream {up}; ids gateway {ids_url} (ids via {api}); text gateway {text_url}")
        cpu0 = cpu_s(ids_gw.pid)
        times = measure({"direct": up, "ids": ids_url, "text": text_url}, args.pairs)
        cpu_ms = (cpu_s(ids_gw.pid) - cpu0) * 1000 / (args.pairs + 50)
    direct = statistics.median(times["direct"])
    result: dict[str, float | int | str] = {"ids_api": api, "direct_ms_p50": round(direct, 3)}
    for mode in ("ids", "text"):
        result[f"{mode}_overhead_ms_p50"] = round(statistics.median(times[mode]) - direct, 3)
        paired = (g - d for g, d in zip(times[mode], times["direct"], strict=True))
        result[f"{mode}_overhead_ms_paired_p50"] = round(statistics.median(paired), 3)
    result["ids_gateway_cpu_ms_per_request"] = round(cpu_ms, 3)
    result["pairs"] = args.pairs
    print(json.dumps(result))


if __name__ == "__main__":
    main()
