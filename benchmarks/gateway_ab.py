"""Chat as text straight to vLLM vs chat through the token-id gateway vs ids straight to vLLM.

A coding-agent conversation is grown around each context size; every request sends the
history plus a fresh ~1.4K-character turn, as agents call, so the prefix cache is warm and
only the tail is new (one turn and a reply join the history each round, so the context
grows slowly: ``context_tokens_first_last``). Six such agents take turns
(``--conversations``), for more rounds without a conversation outgrowing its size. The
variants alternate within each round (rotating who goes first) against the same server, in
one run:

- ``direct_text``: chat to vLLM's ``/v1/chat/completions`` (vLLM renders and tokenizes);
- ``direct_ids``: the client renders and fully encodes, then sends ``prompt: [ids]`` to
  ``/v1/completions`` (client time not counted: the ceiling of what ids can give);
- ``gateway``: chat to the gateway, configured as this server allows (it runs no reasoning
  parser): ``plain_chats = "completions"``, so these chats reach vLLM as ``prompt: [ids]``
  on ``/v1/completions`` and the answers are translated back to chat;
- ``gateway_chat_ids``: the gateway's default, the chat itself with its token ids.

A short-prompt run first alternates direct and gateway chats to measure what the hop costs.
vLLM's own TTFT spreads by several ms from request to request, so beside the medians each
line has ``gateway_added_ms_p50``: TTFT through the gateway minus the gateway's upstream
TTFT for the same request (its ``/metrics``), the part of TTFT spent in the gateway, and
``gateway_over_ids_ci95``, a bootstrap interval showing how far that spread moves the ratio.
Prints figures; one JSON line per size; the last line is the JSON of the largest size.

    python benchmarks/gateway_ab.py --sizes 32000,100000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from operator import sub, truediv
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

from ttftscope.agenttext import agent_turn, build_context
from ttftscope.client.stream import CompletionPath, stream_completion
from ttftscope.gateway.pipeline.vllm_chat import prepare_chat
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.process import running_server
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

VARIANTS = ("direct_text", "direct_ids", "gateway", "gateway_chat_ids")
# how each gateway sends plain chats: the local vLLM runs no reasoning parser, so /v1/completions
# answers them exactly ("gateway"); "gateway_chat_ids" is the default, chat with token ids
GATEWAYS: dict[str, str] = {"gateway": "completions", "gateway_chat_ids": "chat-ids"}
REPLY = "Understood. Continuing."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def gateway_process(upstream: str, plain_chats: str, folder: Path) -> Iterator[str]:
    """``ttftscope gateway`` in its own process (its own GIL, as users run it)."""
    port = _free_port()
    config = folder / f"gateway-{plain_chats}.toml"
    config.write_text(
        f"[gateway]\nport = {port}\n[gateway.upstreams.local]\n"
        f"base_url = {json.dumps(upstream)}\nmodel_dir = {json.dumps(str(model_dir()))}\n"
        f"plain_chats = {json.dumps(plain_chats)}\n"
    )
    cmd = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
    cmd += ["gateway", "--config", str(config)]
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
        apis = re.findall(r'upstream_api{api="([^"]+)"', metrics)
        print(f"gateway on {url} (ids via {' + '.join(apis)})", file=sys.stderr)
        yield url + "/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


class Conversation:
    """One growing agent conversation: a long system context, then round after round.

    In a round every variant sends the history plus a fresh turn of its own (so each finds
    the history cached and its turn new); the gateway's turn and a reply then join the
    history, so the context grows by one turn a round, not one per request. The turns of a
    round are one text behind different one-letter tags: new to the prefix cache from the
    tag on, and the same size for every variant (turn texts differ by up to ~±10% in
    tokens, which would otherwise favour whoever drew the shorter ones).
    """

    def __init__(self, tok: Tokenizer, tokens: int, seed: int) -> None:
        context = build_context(tokens, lambda s: len(tok.encode(s)), seed=seed)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"You are a coding agent. Session {seed}.\n{context}"}
        ]
        self.turns = 0

    def requests(self, n: int) -> list[list[dict[str, Any]]]:
        """``n`` requests: the history plus this round's turn, tagged A, B, C … in turn."""
        self.turns += 1
        turn = agent_turn(self.turns, seed=7)
        tags = [chr(ord("A") + (i + self.turns) % n) for i in range(n)]
        history = [dict(m) for m in self.messages]
        return [[*history, {"role": "user", "content": f"[{t}] {turn}"}] for t in tags]

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
    base = urls[variant] if variant in GATEWAYS else urls["direct"]
    return await _ttft(client, base, "/chat/completions", chat)


async def size_run(
    urls: dict[str, str], model: str, tok: Tokenizer, tokens: int, rounds: int, max_tokens: int,
    conversations: int = 6,
) -> dict[str, Any]:  # fmt: skip
    renderer = ChatRenderer(tok)
    # every request appends a turn and a reply: start below the size by half of what the
    # run adds, so the measured requests sit around it
    per_round = len(tok.encode(agent_turn(0, seed=7) + REPLY)) + 10
    start = max(1000, tokens - per_round * (rounds + 1) // 2)
    # several agents at once, taking turns: more rounds measured without a conversation
    # growing far past the size
    convs = [Conversation(tok, start, seed=tokens + c) for c in range(conversations)]
    first = min(len(tok.encode(renderer.render(c.messages))) for c in convs)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    added: dict[str, list[float]] = {g: [] for g in GATEWAYS}
    async with httpx.AsyncClient(timeout=900) as client:
        for r in range(rounds + 1):  # round 0 fills the prefix cache and the gateway session
            for c, conv in enumerate(convs):
                ms, outside = await one_round(
                    client, conv, r + c, urls, model, renderer, tok, max_tokens
                )
                if r:  # round 0 only warms
                    for v in VARIANTS:
                        times[v].append(ms[v])
                    for g in GATEWAYS:
                        added[g].append(outside[g])
                print(
                    f"  {tokens:,} tokens, round {r}, conversation {c}: "
                    + ", ".join(f"{v} {ms[v]:.0f} ms" for v in VARIANTS),
                    file=sys.stderr,
                )
    last = max(len(tok.encode(renderer.render(c.messages))) for c in convs)
    return {
        "context_tokens": (first + last) // 2,
        "context_tokens_first_last": [first, last],
        **summary(times, added),
        "conversations": conversations,
    }


def summary(times: dict[str, list[float]], added: dict[str, list[float]]) -> dict[str, Any]:
    """The JSON fields of one size: medians, ratios, their spread, the gateways' own part."""
    med = {v: statistics.median(times[v]) for v in VARIANTS}
    text, ids = times["direct_text"], times["direct_ids"]
    out: dict[str, Any] = {f"{v}_median_ttft_ms": round(med[v], 1) for v in VARIANTS}
    for g in GATEWAYS:
        via = times[g]
        out |= {
            f"text_over_{g}": round(med["direct_text"] / med[g], 3),
            f"{g}_over_ids": round(med[g] / med["direct_ids"], 3),
            # the same ratios per round (its requests ran seconds apart), then their median:
            # steadier than the ratio of medians when other work on the machine comes and goes
            f"text_over_{g}_paired": round(statistics.median(map(truediv, text, via)), 3),
            f"{g}_over_ids_paired": round(statistics.median(map(truediv, via, ids)), 3),
            # how far vLLM's own spread moves that ratio: 95% of resampled runs fall inside
            f"{g}_over_ids_ci95": ratio_ci(via, ids),
            # TTFT through the gateway minus the gateway's own upstream TTFT for that request
            # (its /metrics): what the gateway adds, without vLLM's spread in the way
            f"{g}_added_ms_p50": round(statistics.median(added[g]), 2),
        }
    return out | {"requests": sum(len(t) for t in times.values())}


async def one_round(
    client: httpx.AsyncClient, conv: Conversation, turn: int, urls: dict[str, str], model: str,
    renderer: ChatRenderer, tok: Tokenizer, max_tokens: int,
) -> tuple[dict[str, float], dict[str, float]]:  # fmt: skip
    """One request per variant (who goes first rotates with ``turn``), then the history
    grows by the gateway's turn; each variant's TTFT and what each gateway added to it."""
    n = len(VARIANTS)
    order = VARIANTS[turn % n :] + VARIANTS[: turn % n]
    sent = dict(zip(VARIANTS, conv.requests(n), strict=True))
    ms: dict[str, float] = {}
    added: dict[str, float] = {}
    for v in order:
        one = _one(client, v, urls, model, sent[v], renderer, tok, max_tokens)
        ms[v], outside = await timed(client, urls.get(v) if v in GATEWAYS else None, one)
        if outside is not None:
            added[v] = outside
    conv.advance(sent["gateway"])
    return ms, added


def ratio_ci(num: list[float], den: list[float], draws: int = 2000) -> list[float]:
    """A bootstrap 95% interval of median(num) / median(den), resampling whole rounds.

    >>> ratio_ci([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    [2.0, 2.0]
    """
    rng = random.Random(0)
    n = len(num)
    ratios = []
    for _ in range(draws):
        idx = [rng.randrange(n) for _ in range(n)]
        top, bottom = statistics.median(num[i] for i in idx), statistics.median(den[i] for i in idx)
        ratios.append(top / bottom)
    ratios.sort()
    return [round(ratios[int(0.025 * draws)], 3), round(ratios[int(0.975 * draws) - 1], 3)]


async def timed(
    client: httpx.AsyncClient, gateway: str | None, request: Awaitable[float]
) -> tuple[float, float | None]:
    """A request's TTFT and, through a gateway, the part of it outside the gateway's wait
    for its upstream's first token (from the gateway's ``/metrics`` before and after)."""
    if gateway is None:
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
    """Short chats, direct and through each gateway in turn: what the hop adds."""
    # a few tokens, so one of them decodes to visible text (random weights may emit blanks)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "ignore_eos": True,
    }
    names = ("direct", *GATEWAYS)
    times: dict[str, list[float]] = {n: [] for n in names}
    added: dict[str, list[float]] = {g: [] for g in GATEWAYS}
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(pairs + 10):
            for name in names[i % 3 :] + names[: i % 3]:
                one = _ttft(client, urls[name], "/chat/completions", body)
                ms, outside = await timed(client, urls[name] if name in GATEWAYS else None, one)
                if i >= 10:  # after the warm-up rounds: connections, caches
                    times[name].append(ms)
                    if outside is not None:
                        added[name].append(outside)
    direct = times["direct"]
    out: dict[str, Any] = {"short_direct_ms_p50": round(statistics.median(direct), 3)}
    for g in GATEWAYS:
        via, tag = times[g], g.replace("gateway", "short_gateway", 1)
        out |= {
            f"{tag}_ms_p50": round(statistics.median(via), 3),
            f"{tag}_overhead_ms_p50": round(statistics.median(via) - statistics.median(direct), 3),
            f"{tag}_overhead_ms_paired_p50": round(statistics.median(map(sub, via, direct)), 3),
            f"{tag}_added_ms_p50": round(statistics.median(added[g]), 3),
        }
    return out | {"short_pairs": pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="32000,100000", help="context sizes in tokens")
    ap.add_argument("--rounds", type=int, default=20, help="measured rounds per conversation")
    ap.add_argument("--conversations", type=int, default=6, help="agents taking turns")
    ap.add_argument("--short-pairs", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--base-url", help="an already running vLLM (default: the local one)")
    args = ap.parse_args()
    tok = load_tokenizer(model_dir())
    with running_server(wait_s=900) as server:
        base = args.base_url or server.base_url
        with TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            urls = {"direct": base}
            for name, plain in GATEWAYS.items():
                urls[name] = stack.enter_context(gateway_process(base, plain, Path(tmp)))
            short = asyncio.run(short_run(urls, server.model, args.short_pairs))
            print(json.dumps(short))
            for size in (int(s) for s in args.sizes.split(",")):
                result = asyncio.run(
                    size_run(
                        urls,
                        server.model,
                        tok,
                        size,
                        args.rounds,
                        args.max_tokens,
                        conversations=args.conversations,
                    )
                )
                print(json.dumps({**result, **short}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
