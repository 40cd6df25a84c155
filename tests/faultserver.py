"""A small OpenAI-compatible server that misbehaves on request, for tests.

Starlette + uvicorn in a daemon thread on 127.0.0.1, port chosen by the OS. The first path
segment picks the behaviour, so one server serves every scenario::

    with FaultServer(FaultOptions(first_content_delay_s=0.2)) as srv:
        srv.base_url("normal")        # http://127.0.0.1:PORT/normal/v1

Scenarios (chat and completions unless noted):
    normal        role-only chunk, content chunks, usage chunk, [DONE]; unknown model → 404
    slow_headers  sleeps ``header_delay_s`` before answering, then like normal
    rate_limited  429 with Retry-After
    server_error  500 with an OpenAI-style error body
    unauthorized  401 that echoes the presented key and api-key headers (tests check redaction)
    html          200 text/html everywhere (a web page, not an API)
    drop          connection cut mid-stream (no terminating chunk)
    truncated     clean end of body, but no [DONE] and no finish_reason
    stream_error  a role chunk then an in-stream ``{"error": ...}`` event
    odd_chunks    the normal stream cut in odd byte pieces (mid-UTF-8, \\r|\\n, mid-JSON)
    vllm_bools    like normal, but ``stream`` read as vLLM reads it (pydantic's lax bool: "no"
                  does not stream, "maybe" is a 400 in vLLM's shape)
    json_array    200 ``application/json`` ``[]``, streamed or not
    empty_html    200 ``text/html`` with an empty body, streamed or not
    deep_answer   the normal answer with a value nested ``FaultOptions.answer_depth`` deep in
                  its first choice (each SSE event of a stream too)
    surrogate     the normal answer whose first text holds a lone surrogate escape (``\\ud800``)
    by_model      normal, except a request for a model named like one of the scenarios html,
                  json_array, empty_html, deep_answer, surrogate or vllm_bools (or ``name@…``)
                  gets that one (on /v1/messages and /v1/responses: all but the odd answers):
                  an upstream that passes the gateway's probe (of ``models[0]``), then fails

A request (any scenario, every POST API) for a model named ``hold_headers``, ``hold_body`` or
``hold_stream`` (list it in ``FaultOptions.models``) is held: before its headers (vLLM
generating a whole answer), after its headers and part of a JSON body, or after a stream's
first events, for ``FaultOptions.hold_s``, then finished. Each hold is put on
``FaultServer.holds`` as it begins; its ``closed`` event is set when the gateway closes the
connection first (the way it makes vLLM abort).

``GET /{scenario}/health`` answers 200 and ``GET /{scenario}/version`` vLLM's version
(``FaultOptions.version``; None: 404), so it stands in for a local vLLM in tests. Like vLLM,
usage counts the token ids a request sends (``kv_transfer_params.prompt_token_ids`` on chat,
messages and responses, a ``prompt`` list on completions) as its prompt tokens.
``/v1/messages`` and ``/v1/responses`` (normal only) answer a short text in their own
formats, streamed or not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import queue
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ttftscope.threadserver import ThreadServer

__all__ = ["CapturedRequest", "FaultOptions", "FaultServer"]


@dataclass
class FaultOptions:
    models: list[str] = field(default_factory=lambda: ["tiny-llama", "tiny-qwen-chat"])
    content: list[str] = field(default_factory=lambda: ["Hel", "lo", " wörld"])
    chunk_delay_s: float = 0.0
    first_content_delay_s: float = 0.0
    header_delay_s: float = 0.0
    retry_after: str = "7"
    prompt_tokens: int = 11
    cached_tokens: int | None = 8
    max_model_len: int | None = None  # listed in /v1/models as vLLM does (None: not listed)
    version: str | None = "0.32.0"
    answer_depth: int = 1000
    hold_s: float = 60.0


@dataclass
class CapturedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Hold:
    """A request the server holds; ``closed`` is set if the client closes it first."""

    model: str
    path: str
    started_at: float = field(default_factory=time.monotonic)
    closed: threading.Event = field(default_factory=threading.Event)
    closed_at: float = 0.0


class DropConnection(Exception):
    """Raised inside a streaming body: uvicorn then closes the socket mid-response."""


class FaultServer(ThreadServer):
    """Context manager running the fault server; always stopped on exit."""

    def __init__(
        self, options: FaultOptions | None = None, routes: Sequence[BaseRoute] = ()
    ) -> None:
        """``routes`` are matched first (a test's own routes of the stand-in)."""
        self.options = options or FaultOptions()
        self.requests: list[CapturedRequest] = []
        self.holds: queue.Queue[Hold] = queue.Queue()
        super().__init__(_app(self, routes), name="fault server", http="h11")

    @property
    def last_request(self) -> CapturedRequest:
        return self.requests[-1]

    def base_url(self, scenario: str = "normal", *, v1: bool = True) -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}" + ("/v1" if v1 else "")


def _sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def _error_body(message: str, kind: str, code: int) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _chunk(kind: str, model: str, **choice: object) -> dict[str, object]:
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    return {
        "id": "cmpl-1",
        "object": obj,
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "finish_reason": None, **choice}],
    }


def _stream_parts(opts: FaultOptions, kind: str, model: str) -> list[bytes]:
    """The normal stream as a list of SSE events (bytes)."""
    parts: list[bytes] = []
    if kind == "chat":
        parts.append(_sse(_chunk(kind, model, delta={"role": "assistant", "content": ""})))
    for i, piece in enumerate(opts.content):
        last = i == len(opts.content) - 1
        fr = "stop" if last else None
        payload = {"delta": {"content": piece}} if kind == "chat" else {"text": piece}
        parts.append(_sse(_chunk(kind, model, finish_reason=fr, **payload)))
    usage: dict[str, object] = {
        "prompt_tokens": opts.prompt_tokens,
        "completion_tokens": len(opts.content),
        "total_tokens": opts.prompt_tokens + len(opts.content),
    }
    if opts.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": opts.cached_tokens}
    parts.append(_sse({"id": "cmpl-1", "model": model, "choices": [], "usage": usage}))
    parts.append(_sse(b"[DONE]"))
    return parts


def _app(srv: FaultServer, extra: Sequence[BaseRoute]) -> Starlette:
    opts = srv.options

    async def capture(request: Request) -> bytes:
        body = await request.body()
        srv.requests.append(
            CapturedRequest(request.method, request.url.path, dict(request.headers), body)
        )
        return body

    async def models(request: Request) -> Response:
        await capture(request)
        scenario = request.path_params["scenario"]
        if scenario == "html":
            return HTMLResponse("<html><body>Welcome to nginx!</body></html>")
        if scenario in _STATUS_FAULTS:
            return _status_fault(scenario, request, opts)
        data: list[dict[str, object]] = [
            {"id": m, "object": "model", "owned_by": "test"} for m in opts.models
        ]
        if opts.max_model_len is not None:
            data = [{**card, "max_model_len": opts.max_model_len} for card in data]
        return JSONResponse({"object": "list", "data": data})

    async def completions(request: Request) -> Response:
        body = await capture(request)
        scenario = request.path_params["scenario"]
        kind = "chat" if request.url.path.endswith("/chat/completions") else "completions"
        payload = _payload(body)
        if (held := _held(srv, request.url.path, payload, kind)) is not None:
            return held
        if scenario == "by_model":
            scenario = _by_model(payload, _BY_MODEL) or scenario
        if scenario == "slow_headers":
            await asyncio.sleep(opts.header_delay_s)
        if scenario == "html":
            return HTMLResponse("<!doctype html><html><body>Welcome to nginx!</body></html>")
        if scenario in _STATUS_FAULTS:
            return _status_fault(scenario, request, opts)
        stream = bool(payload.get("stream"))
        if scenario == "vllm_bools":
            read = _vllm_bool(payload.get("stream"))
            if isinstance(read, Response):
                return read
            stream = read
        if scenario in _SHAPE_FAULTS:
            return _shape_fault(scenario)
        model = str(payload.get("model"))
        if model not in opts.models:
            msg = f"The model `{model}` does not exist."
            return JSONResponse(_error_body(msg, "NotFoundError", 404), status_code=404)
        ids = _sent_ids(payload)
        # as vLLM does: the ids sent are the prompt
        mine = opts if ids is None else dataclasses.replace(opts, prompt_tokens=len(ids))
        if not stream:
            answer = _full_answer(mine, kind, model)
            if scenario in _ODD_ANSWERS:
                raw = _odd_answer(scenario, answer, opts)
                return Response(raw, media_type="application/json")
            return JSONResponse(answer)
        return StreamingResponse(_body(scenario, mine, kind, model), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def not_found(request: Request) -> Response:
        await capture(request)  # recorded: tests see what the gateway asked for
        return JSONResponse(_error_body("Not Found", "NotFoundError", 404), status_code=404)

    async def version(request: Request) -> Response:
        if opts.version is None:
            return Response(status_code=404)
        return JSONResponse({"version": opts.version})

    async def agent_api(request: Request) -> Response:
        payload = _payload(await capture(request))
        kind = "messages" if request.url.path.endswith("/messages") else "responses"
        if (held := _held(srv, request.url.path, payload, kind)) is not None:
            return held
        if request.path_params["scenario"] == "by_model" and _by_model(payload, _SHAPE_FAULTS):
            return _shape_fault(_by_model(payload, _SHAPE_FAULTS))
        ids = _sent_ids(payload)
        n = opts.prompt_tokens if ids is None else len(ids)
        text = "".join(opts.content)
        stream = payload.get("stream") is True
        if _by_model(payload, {"vllm_bools"}):
            read = _vllm_bool(payload.get("stream"))
            if isinstance(read, Response):
                return read
            stream = read
        if stream:
            return StreamingResponse(
                iter(_agent_stream(kind, text, n)), media_type="text/event-stream"
            )
        return JSONResponse(_agent_answer(kind, text, n))

    return Starlette(
        routes=[
            *extra,
            Route("/{scenario}/health", health, methods=["GET"]),
            Route("/{scenario}/v1/models", models, methods=["GET"]),
            Route("/{scenario}/v1/chat/completions", completions, methods=["POST"]),
            Route("/{scenario}/v1/completions", completions, methods=["POST"]),
            Route("/{scenario}/v1/messages", agent_api, methods=["POST"]),
            Route("/{scenario}/v1/messages/count_tokens", agent_api, methods=["POST"]),
            Route("/{scenario}/v1/responses", agent_api, methods=["POST"]),
            Route("/{scenario}/version", version, methods=["GET"]),
            Route("/{rest:path}", not_found, methods=["GET", "POST"]),
        ]
    )


_HOLDS = {"hold_headers", "hold_body", "hold_stream"}


def _held(srv: FaultServer, path: str, payload: Any, kind: str) -> Response | None:
    """The held answer to a request for one of the ``hold_*`` models, else None."""
    model = _by_model(payload, _HOLDS)
    if not model:
        return None
    if model == "hold_stream":
        parts = _stream_parts(srv.options, kind, model) if kind in ("chat", "completions") else []
        parts = parts or _agent_stream(kind, "".join(srv.options.content), 1)
        return _Held(srv, Hold(model, path), "text/event-stream", parts[:2], parts[2:])
    if kind in ("chat", "completions"):
        raw = json.dumps(_full_answer(srv.options, kind, model)).encode()
    else:
        raw = json.dumps(_agent_answer(kind, "".join(srv.options.content), 1)).encode()
    first = [raw[:10]] if model == "hold_body" else None
    return _Held(srv, Hold(model, path), "application/json", first, [raw[10:] if first else raw])


class _Held(Response):
    """Sends ``first`` (None: not even the headers), holds, then sends ``rest``: unless the
    client closes the connection meanwhile, which the hold records."""

    def __init__(
        self,
        srv: FaultServer,
        hold: Hold,
        media_type: str,
        first: list[bytes] | None,
        rest: list[bytes],
    ) -> None:
        super().__init__()
        self.srv, self.hold, self.first, self.rest = srv, hold, first, rest
        self.held_type = media_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # no Content-Length: the body goes chunked, as vLLM's answers do
        headers = [(b"content-type", self.held_type.encode())]
        head = {"type": "http.response.start", "status": 200, "headers": headers}
        if self.first is not None:
            await send(head)
            for part in self.first:
                await send({"type": "http.response.body", "body": part, "more_body": True})
        self.srv.holds.put(self.hold)
        try:
            async with asyncio.timeout(self.srv.options.hold_s):
                # the body is read: receive() answers only when the client closes
                while (await receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:  # held to the end: the answer goes out as if generated
            if self.first is None:
                await send(head)
            for part in self.rest:
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        self.hold.closed_at = time.monotonic()
        self.hold.closed.set()


_STATUS_FAULTS = {"rate_limited", "server_error", "unauthorized"}
_ODD_ANSWERS = {"deep_answer", "surrogate"}
_SHAPE_FAULTS = {"json_array", "empty_html", "html"}
_BY_MODEL = _ODD_ANSWERS | _SHAPE_FAULTS | {"vllm_bools"}


def _payload(body: bytes) -> Any:
    # orjson: a body the gateway forwards at any depth it reads (1024) is read here too;
    # what only Python's json reads (a lone surrogate escape) as vLLM reads it
    try:
        return orjson.loads(body or b"{}")
    except orjson.JSONDecodeError:
        return json.loads(body)


def _by_model(payload: Any, scenarios: set[str]) -> str:
    """The scenario the request's model names (``name`` or ``name@anything``), or ""."""
    name = str(payload.get("model") if isinstance(payload, dict) else "").split("@")[0]
    return name if name in scenarios else ""


def _vllm_bool(value: object) -> bool | Response:
    """``value`` as vLLM's pydantic reads ``stream``, or vLLM's 400."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    words = {"1": True, "on": True, "t": True, "true": True, "y": True, "yes": True}
    words.update({"0": False, "off": False, "f": False, "false": False, "n": False, "no": False})
    if isinstance(value, str) and value.isascii() and value.lower() in words:
        return words[value.lower()]
    msg = "1 validation error: stream: Input should be a valid boolean"
    return JSONResponse(_error_body(msg, "Bad Request", 400), status_code=400)


def _shape_fault(scenario: str) -> Response:
    if scenario == "json_array":
        return JSONResponse([])
    if scenario == "html":
        return HTMLResponse("<!doctype html><html><body>Welcome to nginx!</body></html>")
    return HTMLResponse("")


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _odd_answer(scenario: str, answer: dict[str, Any], opts: FaultOptions) -> bytes:
    """A whole answer, with the deep value or the lone surrogate of those scenarios."""
    raw = json.dumps(answer).encode()
    if scenario == "deep_answer":  # choices[0] opens 3 levels down: the value adds the rest
        deep = b'"deep": ' + _deep(opts.answer_depth - 3) + b", "
        return raw.replace(b'"index": 0', deep + b'"index": 0', 1)
    if scenario == "surrogate":
        return raw.replace(b'"text": "', b'"text": "\\ud800', 1).replace(
            b'"content": "', b'"content": "\\ud800', 1
        )
    return raw


def _sent_ids(payload: dict[str, Any]) -> list[int] | None:
    """Token ids a request carries (``kv_transfer_params`` on chat, ``prompt`` list)."""
    kv = payload.get("kv_transfer_params")
    ids = kv.get("prompt_token_ids") if isinstance(kv, dict) else payload.get("prompt")
    if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
        return ids
    return None


def _agent_answer(kind: str, text: str, n: int) -> dict[str, object]:
    """A whole answer in the Anthropic or Responses shape, ``n`` input tokens."""
    if kind == "messages":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": n, "output_tokens": 3},
        }
    item = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    return {"id": "resp_1", "object": "response", "output": [item], "usage": {"input_tokens": n}}


def _agent_stream(kind: str, text: str, n: int) -> list[bytes]:
    """The same answer as SSE events: bookkeeping first, then a text delta."""
    if kind == "messages":
        events: list[dict[str, object]] = [
            {"type": "message_start", "message": {"usage": {"input_tokens": n}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            {"type": "message_stop"},
        ]
    else:
        events = [
            {"type": "response.created"},
            {"type": "response.output_text.delta", "delta": text},
            {"type": "response.completed", "response": {"usage": {"input_tokens": n}}},
        ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _status_fault(scenario: str, request: Request, opts: FaultOptions) -> Response:
    if scenario == "rate_limited":
        return JSONResponse(
            _error_body("Too many requests", "RateLimitError", 429),
            status_code=429,
            headers={"Retry-After": opts.retry_after},
        )
    if scenario == "server_error":
        return JSONResponse(_error_body("engine dead", "InternalServerError", 500), status_code=500)
    auth = request.headers.get("authorization", "")
    msg = f"Incorrect API key provided: {auth.removeprefix('Bearer ')}"
    for name in ("api-key", "x-api-key"):  # some gateways echo these too
        if name in request.headers:
            msg += f"; {name}: {request.headers[name]}"
    return JSONResponse(_error_body(msg, "AuthenticationError", 401), status_code=401)


def _full_answer(opts: FaultOptions, kind: str, model: str) -> dict[str, object]:
    text = "".join(opts.content)
    choice: dict[str, object] = {"index": 0, "finish_reason": "stop"}
    if kind == "chat":
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": opts.prompt_tokens, "completion_tokens": 3},
    }


async def _body(scenario: str, opts: FaultOptions, kind: str, model: str) -> AsyncIterator[bytes]:
    parts = _stream_parts(opts, kind, model)
    if scenario == "stream_error":
        yield parts[0]
        yield _sse(_error_body("out of KV cache blocks", "InternalServerError", 500))
        return
    if scenario == "odd_chunks":
        raw = b"".join(p.replace(b"\n", b"\r\n") for p in parts)
        for i in range(0, len(raw), 7):
            yield raw[i : i + 7]
            await asyncio.sleep(0.001)
        return
    if scenario in _ODD_ANSWERS:
        for part in parts[:-1]:  # every event but [DONE]
            yield _odd_answer(scenario, json.loads(part[len(b"data: ") :]), opts).join(
                (b"data: ", b"\n\n")
            )
        yield parts[-1]
        return
    for i, part in enumerate(parts):
        if i == 1:
            await asyncio.sleep(opts.first_content_delay_s)
        elif i > 1:
            await asyncio.sleep(opts.chunk_delay_s)
        if scenario == "drop" and i == 2:
            raise DropConnection("cut mid-stream on purpose")
        if scenario == "truncated" and i == len(parts) - 3:
            return
        yield part
