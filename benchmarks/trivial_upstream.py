"""A trivial OpenAI-compatible streaming server for benchmarks: ``python trivial_upstream.py PORT``.

Raw ASGI on uvicorn + httptools, so it costs next to nothing per request. A streaming chat
request gets, at once and each as its own write (as vLLM sends them), a role chunk, 4
content chunks (the last with ``finish_reason``), usage and ``[DONE]``. A request that does
not stream gets usage counting the ``kv_transfer_params.prompt_token_ids`` it was sent, the
way vLLM 0.32 answers the gateway's start-up probe for ``chat-ids``. Also ``GET /v1/models``
(one model, ``trivial``) and ``GET /metrics`` (an idle vLLM's waiting gauge). As an OTLP/HTTP
sink it takes ``POST /v1/traces`` (an empty answer, as a collector gives) and counts what came
at ``GET /sink`` (``{"posts", "bytes", "spans"}``; spans -1 without ``opentelemetry-proto``).

Benchmarks start it (and other servers) with :func:`started`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

MODEL = "trivial"
Message = MutableMapping[str, Any]
SINK = {"posts": 0, "bytes": 0, "spans": 0}  # what came to POST /v1/traces


def _spans(body: bytes) -> int:
    """How many spans an OTLP protobuf export holds (-1: no opentelemetry-proto to read it)."""
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        return -1
    req = ExportTraceServiceRequest.FromString(body)
    return sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(finish: str | None = None, **delta: str) -> dict[str, object]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}


PARTS = [_sse(_chunk(role="assistant", content=""))]
PARTS += [_sse(_chunk(content=f"t{i}", finish="stop" if i == 3 else None)) for i in range(4)]
PARTS += [
    _sse({"id": "c", "model": MODEL, "choices": [], "usage": {"prompt_tokens": 16}}),
    b"data: [DONE]\n\n",
]
ROUTES = {
    "/v1/models": json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}),
    "/metrics": "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n",
    "/version": json.dumps({"version": "0.32.0"}),  # the gateway sends ids to vLLM 0.32
}


async def app(
    scope: Message, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Any]
) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/v1/traces":
        SINK["posts"] += 1
        SINK["bytes"] += len(body)
        SINK["spans"] = -1 if SINK["spans"] < 0 else SINK["spans"] + _spans(body)
        await _send(send, "application/x-protobuf", b"")
        return
    if scope["method"] == "GET":
        route = json.dumps(SINK) if scope["path"] == "/sink" else ROUTES.get(scope["path"], "{}")
        await _send(send, "application/json", route.encode())
        return
    request = json.loads(body)
    if not request.get("stream"):
        ids = (request.get("kv_transfer_params") or {}).get("prompt_token_ids") or []
        usage = {"prompt_tokens": len(ids), "completion_tokens": 1}
        await _send(send, "application/json", json.dumps({"choices": [], "usage": usage}).encode())
        return
    start = {"type": "http.response.start", "status": 200}
    await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
    for part in PARTS:
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _send(send: Callable[[Message], Any], ctype: str, body: bytes) -> None:
    headers = [(b"content-type", ctype.encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def started(cmd: list[str], health: str) -> Iterator[subprocess.Popen[bytes]]:
    """``cmd`` in its own process, once ``health`` answers; stopped on exit.

    ``started([sys.executable, __file__, "8123"], "http://127.0.0.1:8123/v1/models")``
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{' '.join(cmd[:4])} did not start")
            try:
                httpx.get(health, timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="critical",
        loop="uvloop",
        http="httptools",
        access_log=False,
    )
