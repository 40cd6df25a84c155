"""Chat as text straight to vLLM vs chat through the token-id gateway vs ids straight to vLLM.

A coding-agent conversation is grown around each context size; every request sends the
history plus a fresh ~1.4K-character turn, as agents call, so the prefix cache is warm and
only the tail is new (one turn and a reply join the history each round, so the context
grows slowly: ``context_tokens_first_last``). The three variants alternate within each
round (rotating who goes first) against the same server, in one run:

- ``direct_text``: chat to vLLM's ``/v1/chat/completions`` (vLLM renders and tokenizes);
- ``direct_ids``: the client renders and fully encodes, then sends ``prompt: [ids]`` to
  ``/v1/completions`` (client time not counted: the ceiling of what ids can give);
- ``gateway``: chat to the gateway, which sends vLLM the chat with token ids.

A short-prompt run first alternates direct and gateway chat to measure what the hop costs.
vLLM's own TTFT spreads by several ms from request to request, so beside the medians each
line has ``gateway_added_ms_p50``: TTFT through the gateway minus the gateway's upstream
TTFT for the same request (its ``/metrics``), the part of TTFT spent in the gateway.
Prints figures; one JSON line per size; the last line is the JSON of the largest size.

    python benchmarks/gateway_ab.py --sizes 32000,100000
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
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from ttftscope.client.stream import CompletionPath, stream_completion
from ttftscope.gateway.vllm_chat import prepare_chat
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.process import running_server
from ttftscope.probe.workload import agent_turn, build_context
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

VARIANTS = ("direct_text", "direct_ids", "gateway")
REPLY = "Understood. Continuing."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def gateway_process(upstream: str) -> Iterator[str]:
    """``ttftscope gateway`` in its own process (its own GIL, as users run it)."""
    port = _free_port()
    cmd = [
        sys.executable,
        "-c",
        "from ttftscope.cli import main; main()",
        "gateway",
        "--upstream",
        upstream,
        "--model-dir",
        str(model_dir()),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the gateway exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        metrics = httpx.get(url + "/metrics").text
        api = "chat-ids" if 'api="chat-ids"' in metrics else "other"
        print(f"gateway on {url} (ids via {api})", file=sys.stderr)
        yield url + "/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


class Conversation:
    """One growing agent conversation: a long system context, then round after round.

    In a round every variant sends the history plus a fresh turn of its own (so each finds
    the history cached and its turn new); the gateway's turn and a reply then join the
    history, so the context grows by one turn a round, not one per request.
    """

    def __init__(self, tok: Tokenizer, tokens: int, seed: int) -> None:
        context = build_context(tokens, lambda s: len(tok.encode(s)), seed=seed)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"You are a coding agent. Session {seed}.\n{context}"}
        ]
        self.turns = 0

    def request(self) -> list[dict[str, Any]]:
        """The history plus a turn no request has sent yet."""
        self.turns += 1
        turn = {"role": "user", "content": agent_turn(self.turns, seed=7)}
        return [*(dict(m) for m in self.messages), turn]

    def advance(self, kept: list[dict[str, Any]]) -> None:
        """``kept`` (one of this round's requests) and a reply become the history."""
        self.messages = [*kept, {"role": "assistant", "content": REPLY}]


async def _ttft(
    client: httpx.AsyncClient, base: str, path: CompletionPath, body: dict[str, Any]
) -> float:
    result = await stream_completion(
        client, base_url=base, path=path, body=body, api_key=None, timeout_s=900
    )
    if not result.ok or result.ttft_ms is None:
        raise SystemExit(f"{base}{path} failed: {result.error_kind}: {result.error}")
    return result.ttft_ms


async def _one(
    client: httpx.AsyncClient,
    variant: str,
    urls: dict[str, str],
    model: str,
    messages: list[dict[str, Any]],
    renderer: ChatRenderer,
    tok: Tokenizer,
    max_tokens: int,
) -> float:
    chat = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }
    if variant == "direct_ids":
        inputs = prepare_chat(chat, renderer.source)
        ids = tok.encode(
            renderer.render(inputs.messages, tools=inputs.tools, **inputs.template_kwargs)
        )
        body = {
            "model": model,
            "prompt": ids,
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
        }
        return await _ttft(client, urls["direct"], "/completions", body)
    base = urls["gateway"] if variant == "gateway" else urls["direct"]
    return await _ttft(client, base, "/chat/completions", chat)


async def size_run(
    urls: dict[str, str], model: str, tok: Tokenizer, tokens: int, rounds: int, max_tokens: int
) -> dict[str, Any]:
    renderer = ChatRenderer(tok)
    # every request appends a turn and a reply: start below the size by half of what the
    # run adds, so the measured requests sit around it
    per_round = len(tok.encode(agent_turn(0, seed=7) + REPLY)) + 10
    conv = Conversation(tok, max(1000, tokens - per_round * (rounds + 1) // 2), seed=tokens)
    first = len(tok.encode(renderer.render(conv.messages)))
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    added: list[float] = []
    async with httpx.AsyncClient(timeout=900) as client:
        for r in range(rounds + 1):  # round 0 fills the prefix cache and the gateway session
            order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
            sent = {v: conv.request() for v in VARIANTS}
            for variant in order:
                one = _one(client, variant, urls, model, sent[variant], renderer, tok, max_tokens)
                ms, outside = await timed(client, urls["gateway"], one, variant == "gateway")
                if r:
                    times[variant].append(ms)
                    added += [] if outside is None else [outside]
            conv.advance(sent["gateway"])
            print(
                f"  {tokens:,} tokens, round {r}: "
                + ", ".join(f"{v} {times[v][-1]:.0f} ms" for v in VARIANTS if r),
                file=sys.stderr,
            )
    med = {v: statistics.median(times[v]) for v in VARIANTS}
    pairs = list(zip(times["direct_text"], times["direct_ids"], times["gateway"], strict=True))
    last = len(tok.encode(renderer.render(conv.messages)))
    return {
        "context_tokens": (first + last) // 2,
        "context_tokens_first_last": [first, last],
        "direct_text_median_ttft_ms": round(med["direct_text"], 1),
        "direct_ids_median_ttft_ms": round(med["direct_ids"], 1),
        "gateway_median_ttft_ms": round(med["gateway"], 1),
        "text_over_gateway": round(med["direct_text"] / med["gateway"], 3),
        "gateway_over_ids": round(med["gateway"] / med["direct_ids"], 3),
        # the same ratios per round (its requests ran seconds apart), then their median:
        # steadier than the ratio of medians when other work on the machine comes and goes
        "text_over_gateway_paired": round(statistics.median(t / g for t, _, g in pairs), 3),
        "gateway_over_ids_paired": round(statistics.median(g / i for _, i, g in pairs), 3),
        # TTFT through the gateway minus the gateway's own upstream TTFT for that request
        # (its /metrics): what the gateway adds, without vLLM's spread in the way
        "gateway_added_ms_p50": round(statistics.median(added), 2),
        "requests": sum(len(t) for t in times.values()),
    }


async def timed(
    client: httpx.AsyncClient, gateway: str, request: Awaitable[float], via_gateway: bool
) -> tuple[float, float | None]:
    """A request's TTFT and, through the gateway, the part of it outside the gateway's wait
    for its upstream's first token (from the gateway's ``/metrics`` before and after)."""
    if not via_gateway:
        return await request, None
    before = await upstream_ttft_s(client, gateway)
    ms = await request
    return ms, ms - 1000 * (await upstream_ttft_s(client, gateway) - before)


async def upstream_ttft_s(client: httpx.AsyncClient, gateway: str) -> float:
    """The gateway's running total of upstream time to first token, in seconds."""
    text = (await client.get(gateway.removesuffix("/v1") + "/metrics")).text
    name = "ttftscope_gateway_upstream_first_token_seconds_sum"
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def short_run(urls: dict[str, str], model: str, pairs: int) -> dict[str, Any]:
    """Alternating short chats, direct and through the gateway: what the hop adds."""
    # a few tokens, so one of them decodes to visible text (random weights may emit blanks)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "ignore_eos": True,
    }
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    added: list[float] = []
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(pairs + 10):
            for name in ("direct", "gateway") if i % 2 else ("gateway", "direct"):
                one = _ttft(client, urls[name], "/chat/completions", body)
                ms, outside = await timed(client, urls["gateway"], one, name == "gateway")
                if i >= 10:  # after the warm-up pairs: connections, caches
                    times[name].append(ms)
                    added += [] if outside is None else [outside]
    direct, via = times["direct"], times["gateway"]
    return {
        "short_direct_ms_p50": round(statistics.median(direct), 3),
        "short_gateway_ms_p50": round(statistics.median(via), 3),
        "short_overhead_ms_p50": round(statistics.median(via) - statistics.median(direct), 3),
        "short_overhead_ms_paired_p50": round(
            statistics.median(v - d for v, d in zip(via, direct, strict=True)), 3
        ),
        "short_gateway_added_ms_p50": round(statistics.median(added), 3),
        "short_pairs": pairs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="32000,100000", help="context sizes in tokens")
    ap.add_argument("--rounds", type=int, default=20, help="measured rounds per size")
    ap.add_argument("--short-pairs", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--base-url", help="an already running vLLM (default: the local one)")
    args = ap.parse_args()
    tok = load_tokenizer(model_dir())
    with running_server(wait_s=900) as server:
        base = args.base_url or server.base_url
        with gateway_process(base) as gw:
            urls = {"direct": base, "gateway": gw}
            short = asyncio.run(short_run(urls, server.model, args.short_pairs))
            print(json.dumps(short))
            for size in (int(s) for s in args.sizes.split(",")):
                result = asyncio.run(
                    size_run(urls, server.model, tok, size, args.rounds, args.max_tokens)
                )
                print(json.dumps({**result, **short}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
