"""One streaming OpenAI-compatible request, timed in phases, failures classified not raised.

All phase times are milliseconds after ``t0``, a ``time.perf_counter_ns()`` stamp taken just
before the request is handed to httpx (body serialization happens before ``t0`` and is timed
on its own). Connection, body-sent and header times come from httpcore's ``trace`` extension.

>>> import asyncio, httpx
>>> async def main() -> StreamResult:
...     async with httpx.AsyncClient() as c:
...         return await stream_completion(
...             c, base_url=server_url, path="/chat/completions",
...             body={"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}]},
...             api_key=None, timeout_s=30)
>>> r = asyncio.run(main())
>>> r.ok, r.text, r.ttft_ms > 0
(True, 'Hello wörld', True)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from ttftscope.client.apis import END_EVENTS
from ttftscope.client.classify import (
    RequestFailure,
    classify_status,
    classify_transport,
    not_an_api,
    to_exception,
)
from ttftscope.client.events import EventFold, fold_chunk, fold_end
from ttftscope.client.httpx_faults import httpx_fault
from ttftscope.client.sse import SSEDecoder
from ttftscope.config.redact import header_secrets, redact_text
from ttftscope.errors import FailureKind, TransportFailure

__all__ = [
    "CompletionPath",
    "PhaseTimes",
    "StreamResult",
    "StreamRun",
    "encode_body",
    "raise_for_result",
    "request_headers",
    "stream_completion",
]

CompletionPath = Literal["/chat/completions", "/completions"]


class PhaseTimes(BaseModel):
    """Milliseconds after t0; None when the phase was not reached (or, for connect, reused).

    >>> PhaseTimes(first_content_ms=41.7).headers_ms is None
    True
    """

    connect_ms: float | None = None
    request_sent_ms: float | None = None
    headers_ms: float | None = None
    first_event_ms: float | None = None
    first_content_ms: float | None = None
    last_byte_ms: float | None = None


class StreamResult(BaseModel):
    """Outcome of one streamed request; ``ok=False`` results carry the classified failure,
    and ``transport_failure`` how it failed below HTTP, when it did.

    >>> StreamResult(ok=True, phases=PhaseTimes(first_content_ms=41.7)).ttft_ms
    41.7
    """

    ok: bool
    status: int | None = None
    error_kind: FailureKind | None = None
    transport_failure: TransportFailure | None = None
    error: str | None = None
    error_hint: str | None = None
    retry_after: str | None = None
    phases: PhaseTimes = PhaseTimes()
    serialize_ms: float = 0.0
    request_bytes: int = 0
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    text: str = ""
    content_events: int = 0
    events: int = 0
    finish_reason: str | None = None
    reused_connection: bool = False
    t0_wall: float = 0.0
    tokenize_ms: float | None = None
    client_tokens: int | None = None

    @property
    def ttft_ms(self) -> float | None:
        """Client time to first token: t0 → first event that carries content."""
        return self.phases.first_content_ms


def encode_body(body: Mapping[str, object]) -> bytes:
    """The exact bytes :func:`stream_completion` sends for ``body`` (stream flags forced on).

    >>> encode_body({"model": "m", "prompt": "é"})
    b'{"model":"m","prompt":"\\xc3\\xa9","stream":true,"stream_options":{"include_usage":true}}'
    """
    opts = body.get("stream_options")
    extra = dict(opts) if isinstance(opts, Mapping) else {}
    full = {**body, "stream": True, "stream_options": {**extra, "include_usage": True}}
    return json.dumps(full, ensure_ascii=False, separators=(",", ":")).encode()


def request_headers(api_key: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """JSON-in, SSE-out headers plus ``Authorization: Bearer`` when a key is given.

    >>> request_headers("k")["Authorization"]
    'Bearer k'
    """
    out = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    out.update(extra or {})
    return out


@dataclass(kw_only=True)
class StreamRun(EventFold):
    """Mutable state of one request while it streams; frozen into a StreamResult at the end.

    Public so that a caller sending on another HTTP stack (the bench's aiohttp path) times
    and folds its stream the same way: :meth:`start`, ``stamp("headers")``, ``status``,
    :func:`~ttftscope.client.events.fold_chunk` per chunk, then :meth:`result`.

    >>> StreamRun(url="u", secrets=[]).result().error_kind is None
    True
    """

    secrets: list[str | None]
    t0: int = 0
    request_started: bool = False
    status: int | None = None
    t0_wall: float = 0.0
    serialize_ms: float = 0.0
    request_bytes: int = 0

    def start(self) -> None:
        self.t0_wall = time.time()
        self.t0 = time.perf_counter_ns()

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        if name.endswith((".connect_tcp.complete", ".start_tls.complete")):
            self.stamp("connect")  # TLS completes after TCP, so the later stamp wins
        elif name.endswith(".send_request_headers.started"):
            self.request_started = True
        elif name.endswith(".send_request_body.complete"):
            self.stamp("sent")
        elif name.endswith(".receive_response_headers.complete"):
            self.stamp("headers")

    def ms(self, name: str) -> float | None:
        ns = self.stamps.get(name)
        return None if ns is None else (ns - self.t0) / 1e6

    def result(self) -> StreamResult:
        f = self.failure
        if f is None and self.status == 200 and not self.done:
            f = RequestFailure(
                FailureKind.STREAM_ERROR,
                f"the stream from {self.url} ended after {self.events} events "
                f"without {END_EVENTS[self.api]}",
                hint="the server may have crashed or a proxy cut the connection; check its log",
            )
        phases = PhaseTimes(
            connect_ms=self.ms("connect"),
            request_sent_ms=self.ms("sent"),
            headers_ms=self.ms("headers"),
            first_event_ms=self.ms("first_event"),
            first_content_ms=self.ms("first_content"),
            last_byte_ms=self.ms("last_byte"),
        )
        return StreamResult(
            ok=f is None,
            status=self.status if f is None else f.status or self.status,
            error_kind=None if f is None else f.kind,
            transport_failure=None if f is None else f.transport,
            error=None if f is None else redact_text(f.message, self.secrets),
            error_hint=None if f is None else f.hint,
            retry_after=None if f is None else f.retry_after,
            phases=phases,
            text="".join(self.text),
            reused_connection=self.request_started and "connect" not in self.stamps,
            t0_wall=self.t0_wall,
            serialize_ms=self.serialize_ms,
            request_bytes=self.request_bytes,
            events=self.events,
            content_events=self.content_events,
            model=self.model,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            finish_reason=self.finish_reason,
        )


async def stream_completion(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    path: CompletionPath,
    body: Mapping[str, object],
    api_key: str | None,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    body_bytes: bytes | None = None,
) -> StreamResult:
    """POST one streaming completion and time it; never raises for server/network faults.

    ``body_bytes``, when given, is sent verbatim (``serialize_ms`` is then 0); build it with
    :func:`encode_body`. ``timeout_s`` bounds connect, each write and each gap between reads.

    >>> import asyncio, httpx
    >>> from ttftscope import stream_completion
    >>> async def main() -> StreamResult:
    ...     async with httpx.AsyncClient() as c:
    ...         return await stream_completion(
    ...             c, base_url=server_url, path="/completions",
    ...             body={"model": "tiny-llama", "prompt": [1, 2, 3]}, api_key=None, timeout_s=30)
    >>> r = asyncio.run(main())
    >>> r.ok, r.prompt_tokens, r.finish_reason
    (True, 3, 'stop')
    """
    url = base_url.rstrip("/") + path
    ts = time.perf_counter_ns()
    content = body_bytes if body_bytes is not None else encode_body(body)
    serialize_ms = 0.0 if body_bytes is not None else (time.perf_counter_ns() - ts) / 1e6
    secrets = [api_key, *header_secrets(headers)]
    run = StreamRun(url=url, secrets=secrets, serialize_ms=serialize_ms, request_bytes=len(content))
    request = client.build_request(
        "POST",
        url,
        content=content,
        headers=request_headers(api_key, headers),
        timeout=httpx.Timeout(timeout_s),
        extensions={"trace": run.trace},
    )
    run.start()
    try:
        response = await client.send(request, stream=True)
    except (httpx.HTTPError, OSError) as exc:
        run.failure = classify_transport(httpx_fault(exc), url, timeout_s)
        return run.result()
    try:
        run.stamp("headers", first=True)  # a transport without trace support still gets one
        run.status = response.status_code
        await _read_response(response, run, timeout_s)
    finally:
        await response.aclose()
    return run.result()


async def _read_response(response: httpx.Response, run: StreamRun, timeout_s: float) -> None:
    ctype = response.headers.get("content-type", "")
    try:
        if response.status_code != 200:
            body = await _read_capped(response)
            run.failure = classify_status(response.status_code, response.headers, body, run.url)
        elif "text/event-stream" not in ctype:
            body = await _read_capped(response)
            run.failure = not_an_api(ctype, body, run.url)
        else:
            await _consume_stream(response, run)
    except (httpx.HTTPError, OSError) as exc:
        fault = httpx_fault(exc)
        run.failure = classify_transport(fault, run.url, timeout_s, mid_stream_events=run.events)


async def _read_capped(response: httpx.Response, limit: int = 65536) -> bytes:
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) >= limit:
            break
    return bytes(buf[:limit])


async def _consume_stream(response: httpx.Response, run: StreamRun) -> None:
    decoder = SSEDecoder()
    async for chunk in response.aiter_bytes():
        if chunk and not fold_chunk(decoder, chunk, run):
            return
    fold_end(decoder, run)


def raise_for_result(result: StreamResult) -> None:
    """Raise the :mod:`ttftscope.errors` exception matching a failed result; no-op when ok.

    >>> raise_for_result(StreamResult(ok=True))
    >>> raise_for_result(StreamResult(ok=False, error_kind=FailureKind.TIMEOUT, error="slow"))
    Traceback (most recent call last):
    ...
    ttftscope.RequestTimeout: slow
    """
    if result.ok:
        return
    failure = RequestFailure(
        result.error_kind or FailureKind.REQUEST_ERROR,
        result.error or "request failed",
        hint=result.error_hint,
        status=result.status,
        retry_after=result.retry_after,
    )
    raise to_exception(failure)
