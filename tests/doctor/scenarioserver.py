"""A stand-in vLLM with known, configurable costs: the doctor's truth table runs against it.

Starlette + uvicorn in a daemon thread on 127.0.0.1 (port from the OS). It speaks vLLM's
OpenAI chat and completions APIs (streamed), ``/tokenize``, ``/v1/models`` and ``/metrics``
with vLLM's names: TTFT, queue, prefill, e2e and 0.34's render histograms, prefix-cache
queries and hits, prompt tokens, the waiting and running gauges and ``cache_config_info``.

A request goes through the stages a real server's does, each costing what the
:class:`Costs` say, and the histograms record what each stage took (measured, so queue +
prefill ≤ TTFT always holds)::

    network delay ─► arrival ─► front end (grows with the prompt) ─► queue ─► prefill ─► token
                                                                    (a slot)            └► decode

The engine has :attr:`Costs.slots` slots (vLLM's ``--max-num-seqs``): a request waits in the
queue until one is free and holds it through prefill and :attr:`Costs.decode_s` of decoding
after its first token, so queueing arises from the concurrency of the load alone, and the
time each request waited for its slot is measured, not injected.

With :attr:`Costs.dynamic_system` the client's framework is part of the stand-in: it puts the
time first in each chat request's system prompt, and every body as sent goes to a request
log (``request_log``), as the gateway writes one with ``log_prompts``.

Tokens are 4 characters each; the prefix cache holds 16-token blocks chained by hash, as
vLLM's does. Beside the real cache a shadow cache always runs, so the server knows what a
request would have hit with caching on: the prefill that caching would have saved is its
injected cost. Every request's injected costs go on :attr:`ScenarioServer.charged`, the
truth the doctor's figures are compared with (the doctor never reads them).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ttftscope.threadserver import ThreadServer

MODEL = "scenario"
CHARS_PER_TOKEN = 4
BLOCK = 16
_LAB = f'{{engine="0",model_name="{MODEL}"}}'


@dataclass(frozen=True)
class Costs:
    """What each stage costs. Times in seconds; per-token costs per 1,000 tokens."""

    network_s: float = 0.0  # before the server stamps arrival: outside the server
    frontend_s_per_1k: float = 0.0002  # rendering + tokenization, grows with the prompt
    # a token of non-ASCII text costs the front end this many times an ASCII one (a
    # byte-level BPE's slow path)
    non_ascii_factor: float = 1.0
    slots: int = 0  # the engine's slots (--max-num-seqs); 0: one for every request
    decode_s: float = 0.0  # a request holds its slot this long after its first token
    prefill_s_per_1k: float = 0.0005  # per computed (uncached) prompt token
    prefix_cache: bool = True
    every_429: int = 0  # every n-th request answers 429 (0: never)
    # the client's framework puts the time first in the system prompt (chat), and the bodies
    # as sent go to a request log, as the gateway's log_prompts writes them
    dynamic_system: bool = False


@dataclass
class Charged:
    """One request's injected costs (ms), as the server charged them."""

    prompt_tokens: int
    network_ms: float
    frontend_ms: float
    queue_ms: float  # measured: the time it waited for a slot
    missed_prefill_ms: float  # prefill that caching would have saved
    content_chars: int  # characters of the request's message contents (or prompt)
    non_ascii_ms: float = 0.0  # what the front end's slow non-ASCII path added
    non_ascii_chars: int = 0


@dataclass
class _Hist:
    count: int = 0
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds


@dataclass
class _State:
    hists: dict[str, _Hist] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    waiting: int = 0
    running: int = 0
    requests: int = 0
    cache: set[bytes] = field(default_factory=set)
    shadow: set[bytes] = field(default_factory=set)

    def observe(self, name: str, seconds: float) -> None:
        self.hists.setdefault(name, _Hist()).observe(seconds)

    def add(self, name: str, value: float) -> None:
        self.counters[name] = self.counters.get(name, 0.0) + value


def tokens_of(text: str) -> int:
    """Prompt tokens of ``text`` on this server (4 characters each, rounded up).

    >>> tokens_of("abcdefghi")
    3
    """
    return -(-len(text) // CHARS_PER_TOKEN)


def _blocks(text: str) -> list[bytes]:
    """The hash chain of the text's full 16-token blocks."""
    out: list[bytes] = []
    prev = b""
    step = BLOCK * CHARS_PER_TOKEN
    for i in range(0, len(text) - step + 1, step):
        prev = hashlib.blake2b(prev + text[i : i + step].encode(), digest_size=16).digest()
        out.append(prev)
    return out


def _hits(cache: set[bytes], blocks: list[bytes]) -> int:
    """Tokens of the longest cached prefix; the blocks are then cached."""
    n = 0
    for b in blocks:
        if b not in cache:
            break
        n += 1
    cache.update(blocks)
    return n * BLOCK


def _prompt(payload: dict[str, Any]) -> str:
    prompt = payload.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "x" * (len(prompt) * CHARS_PER_TOKEN)
    messages = payload.get("messages") or []
    return "".join(f"<|{m.get('role')}|>{m.get('content')}\n" for m in messages)


class ScenarioServer(ThreadServer):
    """The stand-in; ``charged`` holds each answered request's injected costs, in order."""

    def __init__(self, costs: Costs, request_log: Path | None = None) -> None:
        self.costs = costs
        self.request_log = request_log
        self.state = _State()
        self.charged: list[Charged] = []
        # the engine's slots; bound to the server's loop at first use
        self.engine = asyncio.Semaphore(costs.slots) if costs.slots else None
        super().__init__(_app(self), name="scenario server")

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def received(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The body as the client's framework sends it: with the time first in the system
        prompt when :attr:`Costs.dynamic_system`; logged when there is a request log."""
        messages = payload.get("messages")
        if self.costs.dynamic_system and isinstance(messages, list) and messages:
            now = datetime.now(UTC).isoformat()
            first = {**messages[0], "content": f"Current time: {now}\n{messages[0]['content']}"}
            payload = {**payload, "messages": [first, *messages[1:]]}
        if self.request_log is not None:
            with self.request_log.open("a", encoding="utf-8") as log:
                log.write(json.dumps({"body": payload}) + "\n")
        return payload

    async def _front_end(self, text: str) -> tuple[int, int, float]:
        """Render and tokenize: the prompt's tokens, its non-ASCII characters and what the
        slow non-ASCII path added (ms)."""
        c, t0 = self.costs, time.perf_counter()
        n = tokens_of(text)
        wide = sum(1 for ch in text if not ch.isascii())
        slow_ms = c.frontend_s_per_1k * (c.non_ascii_factor - 1) * wide / CHARS_PER_TOKEN
        await asyncio.sleep((c.frontend_s_per_1k * n + slow_ms) / 1000)
        self.state.observe("vllm:request_render_duration_seconds", time.perf_counter() - t0)
        return n, wide, slow_ms

    async def serve_one(self, text: str, chars: int, stable: str) -> tuple[int, float]:
        """Run one request's stages; its prompt tokens and the server TTFT (s).

        ``stable`` is the prompt without the dynamic field: what the shadow cache would have
        held had the prompt's start not changed.
        """
        c, st = self.costs, self.state
        await asyncio.sleep(c.network_s)
        t0 = time.perf_counter()
        n, wide, slow_ms = await self._front_end(text)
        st.waiting += 1
        q0 = time.perf_counter()
        if self.engine is not None:
            await self.engine.acquire()
        waited = time.perf_counter() - q0
        st.waiting -= 1
        st.running += 1
        st.observe("vllm:request_queue_time_seconds", waited)
        blocks = _blocks(text)
        could = _hits(st.shadow, _blocks(stable))
        hits = _hits(st.cache, blocks) if c.prefix_cache else 0
        p0 = time.perf_counter()
        await asyncio.sleep(c.prefill_s_per_1k * (n - hits) / 1000)
        st.observe("vllm:request_prefill_time_seconds", time.perf_counter() - p0)
        ttft = time.perf_counter() - t0
        st.observe("vllm:time_to_first_token_seconds", ttft)
        st.add("vllm:prefix_cache_queries", n)
        st.add("vllm:prefix_cache_hits", hits)
        st.add("vllm:prompt_tokens", n)
        self.charged.append(
            Charged(
                prompt_tokens=n,
                network_ms=c.network_s * 1000,
                frontend_ms=c.frontend_s_per_1k * n + slow_ms,
                queue_ms=waited * 1000,
                missed_prefill_ms=c.prefill_s_per_1k * (could - hits),
                content_chars=chars,
                non_ascii_ms=slow_ms,
                non_ascii_chars=wide,
            )
        )
        return n, ttft

    async def finish(self, ttft: float) -> None:
        """Decode (holding the slot), then free the slot and record the request."""
        await asyncio.sleep(self.costs.decode_s)
        if self.engine is not None:
            self.engine.release()
        st = self.state
        st.running -= 1
        st.observe("vllm:e2e_request_latency_seconds", ttft + self.costs.decode_s)
        st.add("vllm:request_success", 1)

    def exposition(self) -> str:
        st = self.state
        caching = "True" if self.costs.prefix_cache else "False"
        lines = [
            f'vllm:cache_config_info{{block_size="{BLOCK}",enable_prefix_caching="{caching}",'
            'engine="0",num_gpu_blocks="5120"} 1.0',
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{_LAB} {st.waiting}",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{_LAB} {st.running}",
        ]
        for name, value in sorted(st.counters.items()):
            lines += [f"# TYPE {name} counter", f"{name}_total{_LAB} {value}"]
        for name, h in sorted(st.hists.items()):
            lines += [
                f"# TYPE {name} histogram",
                f'{name}_bucket{{engine="0",le="+Inf",model_name="{MODEL}"}} {h.count}',
                f"{name}_count{_LAB} {h.count}",
                f"{name}_sum{_LAB} {h.total}",
            ]
        return "\n".join(lines) + "\n"


def _event(kind: str, piece: str | None, done: bool = False) -> bytes:
    if kind == "chat":
        delta = {} if piece is None else {"content": piece}
        choice: dict[str, Any] = {"index": 0, "delta": delta}
    else:
        choice = {"index": 0, "text": piece or ""}
    choice["finish_reason"] = "stop" if done else None
    obj = {"id": "s-1", "object": f"{kind}.chunk", "model": MODEL, "choices": [choice]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _content_chars(payload: dict[str, Any]) -> int:
    prompt = payload.get("prompt")
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(str(m.get("content") or "")) for m in payload.get("messages") or [])


async def _stream(
    srv: ScenarioServer, kind: str, payload: dict[str, Any], sent: dict[str, Any]
) -> AsyncIterator[bytes]:
    """``payload`` as the client's framework sent it, ``sent`` as the caller wrote it."""
    if kind == "chat":
        yield _event(kind, None)
    n, ttft = await srv.serve_one(_prompt(payload), _content_chars(payload), _prompt(sent))
    yield _event(kind, "Understood.")
    await srv.finish(ttft)  # recorded before the last event: a scrape after [DONE] sees it
    yield _event(kind, "", done=True)
    usage = {"prompt_tokens": n, "completion_tokens": 2, "total_tokens": n + 2}
    yield b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _app(srv: ScenarioServer) -> Starlette:
    async def completions(request: Request) -> Response:
        sent = json.loads(await request.body())
        payload = srv.received(sent)
        srv.state.requests += 1
        every = srv.costs.every_429
        if every and srv.state.requests % every == 0:
            error = {"message": "rate limited", "type": "rate_limit", "code": 429}
            return JSONResponse({"error": error}, status_code=429, headers={"Retry-After": "1"})
        kind = "chat" if request.url.path.endswith("chat/completions") else "text_completion"
        stream = _stream(srv, kind, payload, sent)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def tokenize(request: Request) -> Response:
        text = _prompt(json.loads(await request.body()))
        ids = [1 + (hash(text[i : i + 4]) % 30000) for i in range(0, len(text), CHARS_PER_TOKEN)]
        return JSONResponse({"tokens": ids, "count": len(ids), "max_model_len": 131072})

    async def models(request: Request) -> Response:
        model = {"id": MODEL, "object": "model", "max_model_len": 131072}
        return JSONResponse({"object": "list", "data": [model]})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(srv.exposition())

    async def ok(request: Request) -> Response:
        return JSONResponse({"version": "0.34.0"})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/v1/models", models),
            Route("/metrics", metrics),
            Route("/health", ok),
            Route("/version", ok),
        ]
    )
