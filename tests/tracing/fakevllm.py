"""A stand-in for vLLM started with ``--otlp-traces-endpoint``: it streams a short answer,
counts the request in its ``/metrics`` histograms and exports an ``llm_request`` span for it
through the real OpenTelemetry SDK (as vLLM's output processor does), with the same figures.

Each request's figures differ (request ``n`` has queue ``n`` ms), so a join that mixes two
requests up shows; ``state.issued`` has each request's figures by its ``X-Request-Id``.
``span_skew_s`` adds to the span's TTFT only: the two sources disagree.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ttftscope.threadserver import ThreadServer

MODEL = "tiny-llama"
_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}


def figures(n: int) -> dict[str, float]:
    """The seconds the stand-in reports for its ``n``-th request (from 1)."""
    queue, prefill = n / 1000, 0.020 + n / 10_000
    return {"queue": queue, "prefill": prefill, "ttft": queue + prefill + 0.005, "e2e": 0.1}


@dataclass
class _State:
    endpoint: str | None  # None: vLLM started without --otlp-traces-endpoint
    span_skew_s: float = 0.0
    first_token_s: float = 0.0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_HISTOGRAMS, 0.0))
    count: int = 0
    issued: dict[str, dict[str, float]] = field(default_factory=dict)  # by X-Request-Id
    lock: threading.Lock = field(default_factory=threading.Lock)
    provider: TracerProvider | None = None

    def tracer_provider(self) -> TracerProvider:
        if self.provider is None:
            self.provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
            exporter = OTLPSpanExporter(endpoint=self.endpoint)
            self.provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=20))
        return self.provider

    def finish(self, headers: dict[str, str], arrival_ns: int, request_id: str) -> None:
        with self.lock:
            self.count += 1
            got = figures(self.count)
            self.issued[headers.get("x-request-id", "")] = got
            for k, v in got.items():
                self.sums[k] += v
        if self.endpoint is None:
            return
        parent = TraceContextTextMapPropagator().extract(headers)
        span = (
            self.tracer_provider()
            .get_tracer("vllm.llm_engine")
            .start_span("llm_request", context=parent, kind=SpanKind.SERVER, start_time=arrival_ns)
        )
        span.set_attributes(
            {
                "gen_ai.latency.time_to_first_token": got["ttft"] + self.span_skew_s,
                "gen_ai.latency.time_in_queue": got["queue"],
                "gen_ai.latency.time_in_model_prefill": got["prefill"],
                "gen_ai.latency.e2e": got["e2e"],
                "gen_ai.request.id": request_id,
            }
        )
        span.end()

    def metrics(self) -> str:
        lines = []
        with self.lock:
            for key, name in _HISTOGRAMS.items():
                label = f'model_name="{MODEL}"'
                lines += [
                    f"# TYPE {name} histogram",
                    f'{name}_bucket{{{label},le="+Inf"}} {self.count}',
                    f"{name}_sum{{{label}}} {self.sums[key]!r}",
                    f"{name}_count{{{label}}} {self.count}",
                ]
        return "\n".join(lines) + "\n"


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _app(state: _State) -> Starlette:
    async def chat(request: Request) -> Response:
        arrival = time.time_ns()
        await request.body()
        headers = dict(request.headers)
        sent = headers.get("x-request-id", "0" * 32)
        request_id = f"chatcmpl-{sent}"

        async def stream() -> AsyncIterator[bytes]:
            await asyncio.sleep(state.first_token_s)  # requests overlap under concurrency
            chunk = {"id": request_id, "object": "chat.completion.chunk", "model": MODEL}
            yield _sse({**chunk, "choices": [{"index": 0, "delta": {"content": "ok"}}]})
            done = {"index": 0, "delta": {}, "finish_reason": "stop"}
            yield _sse({**chunk, "choices": [done]})
            usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
            yield _sse({**chunk, "choices": [], "usage": usage})
            yield b"data: [DONE]\n\n"
            state.finish(headers, arrival, request_id)  # vLLM too: as the request finishes

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(state.metrics())

    async def models(request: Request) -> Response:
        card = {"id": MODEL, "object": "model", "max_model_len": 131072}
        return JSONResponse({"object": "list", "data": [card]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


class TracedVllm(ThreadServer):
    """The stand-in on 127.0.0.1, exporting its spans to ``endpoint``."""

    def __init__(
        self, endpoint: str | None, *, span_skew_s: float = 0.0, first_token_s: float = 0.0
    ) -> None:
        self.state = _State(endpoint, span_skew_s, first_token_s)
        super().__init__(_app(self.state), name="traced fake vLLM")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        super().stop()
        if self.state.provider is not None:
            self.state.provider.shutdown()
            self.state.provider = None
