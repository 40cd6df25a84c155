"""Is the load generator the bottleneck? ``ttftscope bench`` vs ``vllm bench serve``.

Against a trivial local streaming endpoint (``trivial_upstream.py`` in its own process,
answering every chat request with 4 content chunks at once), both runners send the same number of
requests at ``--request-rate inf`` with the same concurrency, one after the other in one
run. Ours keeps its full measurement per request (phases, per-chunk times, a flushed
record, the 250 ms ``/metrics`` sampler). The rate each sustains is completed requests over
its run's duration; ``overhead_us_per_request`` is our process's CPU time per request.

With ``--ttft-check`` it then compares TTFT on the local vLLM at concurrency 1 with the
same prompts (a prime pass first, so both runs find every prompt cached alike), in
alternating rounds (``--ttft-rounds``): the medians of each runner's round medians.

Prints figures; the last line is JSON: ``ours_rps``, ``vllm_bench_rps``, ``ratio``,
``overhead_us_per_request`` (and the TTFT medians with ``--ttft-check``).

    python benchmarks/loadgen_capacity.py --requests 2000 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trivial_upstream
import uvloop
from trivial_upstream import started

from ttftscope.agenttext import agent_turn
from ttftscope.bench.options import BenchOptions, ContextSizes, TargetSpec
from ttftscope.bench.plan.traces import AppendShape
from ttftscope.bench.runner import run_bench
from ttftscope.client.endpoint import Endpoint
from ttftscope.localserver.install import vllm_home
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.process import running_server
from ttftscope.localserver.vllm_bench import vllm_bench_command

MODEL = "trivial"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def trivial_endpoint() -> Iterator[str]:
    """The trivial streaming endpoint in its own process; yields its base URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with started([sys.executable, trivial_upstream.__file__, str(port)], url + "/v1/models"):
        yield url


def ours(base: str, model: str, opts: BenchOptions, out: Path) -> tuple[dict[str, Any], float]:
    """Our bench run, in this process on uvloop; its summary and CPU seconds spent."""
    ep = Endpoint(base_url=base + "/v1", metrics_url=base + "/metrics", model=model, max_tokens=4)
    cpu = time.process_time()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        run = runner.run(run_bench(ep, opts, result_dir=out))
    return run.summary, time.process_time() - cpu


def vllm_bench(base: str, model: str, args: list[str], out: Path) -> dict[str, Any] | None:
    """``vllm bench serve`` from the local vLLM venv; its result JSON (None: not installed)."""
    venv = vllm_home() / "venv"
    if not venv.is_dir():
        print("vllm bench serve: no local vLLM venv (run `ttftscope local-server install`)")
        return None
    full = [
        "--backend", "openai-chat", "--base-url", base, "--endpoint", "/v1/chat/completions",
        "--model", model, "--tokenizer", str(model_dir()), "--request-rate", "inf",
        "--save-result", "--result-dir", str(out), "--result-filename", "vllm.json", *args,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        vllm_bench_command(venv, full), capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        print(f"vllm bench serve failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
        return None
    result: dict[str, Any] = json.loads((out / "vllm.json").read_text())
    return result


def capacity(requests: int, concurrency: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """Both runners at saturation against the trivial endpoint, alternating, best of each.

    The machine is shared (and its speed drifts): alternating rounds lets both see the same
    conditions, and the best round of each is what it can sustain.
    """
    opts = BenchOptions(
        sessions=concurrency,
        context_tokens=ContextSizes("list", (0,)),
        num_prompts=requests,
        think_time_s=0.0,
        num_warmups=0,
        appends=AppendShape(16, 16, 16),  # tiny turns, as vllm bench's 16 random tokens
        compaction_share=0.0,
        max_tokens=4,  # as vllm bench's --random-output-len 4
        targets=(TargetSpec("direct"),),
    )
    theirs_args = [
        "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "4",
        "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
    ]  # fmt: skip
    mine: list[tuple[float, float]] = []  # (requests per second, CPU us per request)
    theirs: list[float] = []
    with trivial_endpoint() as base:
        for k in range(rounds):
            summary, cpu_s = ours(base, MODEL, opts, tmp / f"ours-{k}")
            mine.append((summary["request_throughput"], cpu_s / summary["completed"] * 1e6))
            print(f"round {k + 1}: ours {summary['completed']} requests, {mine[-1][0]:.0f}/s, "
                  f"{mine[-1][1]:.0f} us CPU each")  # fmt: skip
            result = vllm_bench(base, MODEL, theirs_args, tmp / f"vllm-{k}")
            if result is not None:
                theirs.append(result["request_throughput"])
                print(f"round {k + 1}: vllm bench serve {result['completed']} requests, "
                      f"{theirs[-1]:.0f}/s")  # fmt: skip
    best, their_best = max(mine), max(theirs, default=None)
    return {
        "requests": requests,
        "concurrency": concurrency,
        "ours_rps": round(best[0], 1),
        "vllm_bench_rps": None if their_best is None else round(their_best, 1),
        "ratio": None if not their_best else round(best[0] / their_best, 3),
        "overhead_us_per_request": round(min(c for _r, c in mine), 1),
    }


def ttft_inputs(prompts: int, chars: int, tmp: Path) -> tuple[Path, Path]:
    """The same prompts as vllm bench's ShareGPT file and as our replay file."""
    texts = [agent_turn(50_000 + i, seed=int(time.time()), chars=chars) for i in range(prompts)]
    # ShareGPT's format: the one file dataset vllm bench reads without pandas
    sharegpt = tmp / "prompts.json"
    rows = [
        {
            "id": str(i),
            "conversations": [{"from": "human", "value": t}, {"from": "gpt", "value": "ok"}],
        }
        for i, t in enumerate(texts)
    ]
    sharegpt.write_text(json.dumps(rows))
    replay = tmp / "replay.jsonl"
    # the very body vllm bench's openai-chat backend sends: the text as one content part
    bodies = [
        {"messages": [{"role": "user", "content": [{"type": "text", "text": t}]}]} for t in texts
    ]
    replay.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return sharegpt, replay


def ttft_check(prompts: int, chars: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """Median TTFT of both runners on the local vLLM, concurrency 1, the same prompts.

    One run of each is one sample of a shared machine whose speed drifts by tens of
    percent within minutes: the runners alternate for ``rounds`` rounds (who goes first
    alternates too), and the medians of their round medians are compared.
    """
    sharegpt, replay = ttft_inputs(prompts, chars, tmp)
    opts = BenchOptions(sessions=1, replay=replay, think_time_s=0.0, num_warmups=0, max_tokens=4)
    theirs_args = [
        "--dataset-name", "sharegpt", "--dataset-path", str(sharegpt),
        "--sharegpt-output-len", "4", "--num-prompts", str(prompts),
        "--max-concurrency", "1", "--disable-shuffle",
    ]  # fmt: skip
    mine: list[float] = []
    their: list[float] = []
    with running_server() as server:
        root = server.root_url
        ours(root, server.model, opts, tmp / "prime")  # every prompt cached for both runs
        for k in range(rounds):
            for who in ("vllm", "ours") if k % 2 == 0 else ("ours", "vllm"):
                if who == "ours":
                    summary, _ = ours(root, server.model, opts, tmp / f"ours-ttft-{k}")
                    mine.append(summary["median_ttft_ms"])
                    continue
                got = vllm_bench(root, server.model, theirs_args, tmp / f"vllm-ttft-{k}")
                their += [] if got is None else [got["median_ttft_ms"]]
            print(f"TTFT round {k + 1}: ours {mine[-1]:.1f} ms, vllm bench serve "
                  f"{their[-1] if their else float('nan'):.1f} ms")  # fmt: skip
    med_mine = statistics.median(mine)
    med_their = statistics.median(their) if their else None
    print(f"median TTFT at concurrency 1: ours {med_mine:.1f} ms, vllm bench serve "
          f"{'-' if med_their is None else f'{med_their:.1f}'} ms")  # fmt: skip
    return {
        "ours_median_ttft_ms": round(med_mine, 3),
        "vllm_bench_median_ttft_ms": None if med_their is None else round(med_their, 3),
        "ttft_ratio": None if not med_their else round(med_mine / med_their, 3),
        "ttft_rounds": {"ours": [round(x, 1) for x in mine], "vllm": [round(x, 1) for x in their]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds, best of each")
    parser.add_argument("--ttft-check", action="store_true", help="also compare TTFT on vLLM")
    parser.add_argument("--ttft-prompts", type=int, default=20)
    parser.add_argument("--ttft-chars", type=int, default=2500, help="vllm bench: <1024 tokens")
    parser.add_argument("--ttft-rounds", type=int, default=3, help="alternating TTFT rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        result = capacity(args.requests, args.concurrency, args.rounds, Path(d))
        if args.ttft_check:
            result.update(ttft_check(args.ttft_prompts, args.ttft_chars, args.ttft_rounds, Path(d)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
