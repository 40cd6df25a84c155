"""A fake vLLM for the ``instrument`` tests: chat and completions, streamed or not, and /metrics.

Starlette + uvicorn in a daemon thread on 127.0.0.1 (port from the OS), stopped on exit.
Every finished request adds known amounts to vLLM V1's histograms (queue 5 ms, prefill 10 ms,
TTFT 20 ms, e2e 30 ms) and counters (``prompt_tokens`` prompt tokens, half of them prefix
hits), before its last chunk is sent, so a scrape after the call sees exactly that request.
``rate_limited = True`` makes completions answer 429 with ``Retry-After: 7``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ttftscope.threadserver import ThreadServer

MODEL = "tiny"
QUEUE_S, PREFILL_S, TTFT_S, E2E_S = 0.005, 0.010, 0.020, 0.030


@dataclass
class _Totals:
    requests: int = 0
    prompt_tokens: int = 0

    def exposition(self) -> str:
        lab = f'{{engine="0",model_name="{MODEL}"}}'
        n = self.requests
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{lab} 0",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{lab} 0",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{lab} {self.prompt_tokens}",
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{lab} {self.prompt_tokens}",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{lab} {self.prompt_tokens / 2}",
        ]
        for name, each in (
            ("vllm:time_to_first_token_seconds", TTFT_S),
            ("vllm:request_queue_time_seconds", QUEUE_S),
            ("vllm:request_prefill_time_seconds", PREFILL_S),
            ("vllm:e2e_request_latency_seconds", E2E_S),
        ):
            lines += [
                f"# TYPE {name} histogram",
                f'{name}_bucket{{engine="0",le="+Inf",model_name="{MODEL}"}} {n}',
                f"{name}_count{lab} {n}",
                f"{name}_sum{lab} {n * each}",
            ]
        return "\n".join(lines) + "\n"


@dataclass
class FakeVllm(ThreadServer):
    """Context manager running the fake server; ``requests`` holds every JSON body."""

    prompt_tokens: int = 12
    chunk_delay_s: float = 0.0
    rate_limited: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    totals: _Totals = field(default_factory=_Totals)
    port: int = 0

    def __post_init__(self) -> None:
        ThreadServer.__init__(self, _app(self), name="fake vLLM", port=self.port)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def finish_one(self) -> None:
        self.totals.requests += 1
        self.totals.prompt_tokens += self.prompt_tokens


def _chunk(kind: str, piece: str | None, usage: dict[str, int] | None = None) -> bytes:
    if kind == "chat":
        choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": piece or "", "finish_reason": None}
        obj = "text_completion"
    data: dict[str, Any] = {
        "id": "c1",
        "object": obj,
        "created": 1,
        "model": MODEL,
        "choices": [] if usage else [choice],
    }
    if usage:
        data["usage"] = usage
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _usage(srv: FakeVllm) -> dict[str, int]:
    return {"prompt_tokens": srv.prompt_tokens, "completion_tokens": 3, "total_tokens": 15}


async def _stream(srv: FakeVllm, kind: str, usage: bool) -> AsyncIterator[bytes]:
    if kind == "chat":
        yield _chunk(kind, "")  # role-only first chunk, as vLLM sends it
    for i, piece in enumerate(("Hel", "lo", "!")):
        await asyncio.sleep(srv.chunk_delay_s)
        if i == 2:
            srv.finish_one()
        yield _chunk(kind, piece)
    if usage:
        yield _chunk(kind, None, _usage(srv))
    yield b"data: [DONE]\n\n"


def _full(srv: FakeVllm, kind: str) -> dict[str, Any]:
    srv.finish_one()
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
    if kind == "chat":
        choice["message"] = {"role": "assistant", "content": "Hello!"}
    else:
        choice["text"] = "Hello!"
    obj = "chat.completion" if kind == "chat" else "text_completion"
    return {
        "id": "c1",
        "object": obj,
        "created": 1,
        "model": MODEL,
        "choices": [choice],
        "usage": _usage(srv),
    }


def _app(srv: FakeVllm) -> Starlette:
    async def completions(request: Request) -> Response:
        payload = json.loads(await request.body())
        srv.requests.append(payload)
        kind = "chat" if request.url.path.endswith("/chat/completions") else "text"
        if srv.rate_limited:
            err = {"error": {"message": "slow down", "type": "RateLimitError", "code": 429}}
            return JSONResponse(err, status_code=429, headers={"Retry-After": "7"})
        if not payload.get("stream"):
            await asyncio.sleep(srv.chunk_delay_s)
            return JSONResponse(_full(srv, kind))
        usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(_stream(srv, kind, usage), media_type="text/event-stream")

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(srv.totals.exposition())

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/metrics", metrics, methods=["GET"]),
        ]
    )
