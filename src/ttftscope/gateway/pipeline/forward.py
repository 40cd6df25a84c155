"""Send a request upstream and relay the answer: raw bytes for streams, errors as they are.

Upstream errors (4xx, 429 with ``Retry-After``, 5xx) reach the client with their status and
body. An upstream that cannot be reached is a 502, one that does not answer in time a 504,
both with an error body in the route's API format. So is a 200 that is not what was asked
for: another content type (a web page, JSON for a stream), or a whole answer that is not a
JSON object. A client that disconnects closes the upstream connection, which makes vLLM
abort the request.

A whole answer is held up to ``gateway.max_answer_mb``. Past it, a 200 passed on unchanged
goes through as it arrives, never held whole, once it is seen to open a JSON object (all
that can be checked of it); an upstream that breaks it off then closes the client's
connection. An error's body (scrubbed of credentials) and an answer to rewrite are needed
whole: past the cap they are a 502.

The first token of a stream is timed for ``/metrics``: the first SSE event that carries one
(:func:`token_event`): the second on chat (a role chunk opens it), the first on completions,
the first text or tool-input delta on messages and responses.

>>> token_event("/messages")
b'_delta"'
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing
from typing import Any, Literal

import orjson
from starlette.responses import Response, StreamingResponse

from ttftscope.errors import TransportFailure
from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.transport.apierrors import ErrorFormat, error_response, stream_error
from ttftscope.gateway.transport.asgi import CutShort
from ttftscope.gateway.transport.hop import Answer, HopError
from ttftscope.gateway.transport.hoptrace import CURRENT, UPSTREAM
from ttftscope.tracing.names import FIRST_BYTE, FIRST_TOKEN

log = logging.getLogger("ttftscope.gateway")
_PASSED_HEADERS = ("content-type", "retry-after", "x-request-id")
_NOT_SPACE = re.compile(rb"[^ \t\r\n]")  # the first byte of a JSON value


Rewrite = Callable[[bytes], bytes]


class BadAnswer(Exception):
    """Raised by a ``rewrite_body`` that cannot read the upstream's 200 answer: says what came."""


async def forward(
    up: Upstream,
    path: str,
    data: bytes,
    *,
    stream: bool,
    metrics: GatewayMetrics,
    rewrite_stream: tuple[Rewrite, Callable[[], bytes]] | None = None,
    rewrite_body: Rewrite | None = None,
    fmt: ErrorFormat = "openai",
    method: Literal["GET", "POST"] = "POST",
) -> Response:
    """POST ``data`` to ``up``'s ``path`` (or GET it) and answer with what comes back.

    ``rewrite_stream`` (feed, close) turns upstream SSE into other SSE (completions → chat);
    ``rewrite_body`` does the same for a whole 200 answer.
    """
    t0 = time.perf_counter()
    hop = CURRENT.get()
    if hop is not None:
        hop.open(UPSTREAM)
    try:
        resp = await _send(up, method, path, data, None if hop is None else hop.upstream)
    except HopError as exc:
        if exc.kind is TransportFailure.TIMEOUT:
            return error_response(fmt, 504, f"upstream {up.name!r} did not answer in time ({exc})")
        return error_response(fmt, 502, f"upstream {up.name!r} is unreachable ({exc})")
    metrics.upstream_ttfb.labels(up.name).observe(time.perf_counter() - t0)
    if hop is not None:
        hop.mark(FIRST_BYTE)
    headers = {k: v for k in _PASSED_HEADERS if (v := resp.headers.get(k)) is not None}
    wrong = _unexpected_type(resp.headers.get("content-type"), stream)
    if resp.status == 200 and wrong is not None:
        resp.close()  # not what was asked for (a web page, an SSE body for JSON): not relayed
        return error_response(fmt, 502, f"upstream {up.name!r} answered 200 with {wrong}")
    if resp.status != 200 or not stream:
        return await _whole(up, resp, headers, rewrite_body, fmt)
    return StreamingResponse(
        _relay(up, resp, t0, metrics, rewrite_stream, token_event(path), fmt),
        status_code=200,
        headers=headers,
        media_type="text/event-stream",
    )


async def _send(
    up: Upstream,
    method: Literal["GET", "POST"],
    path: str,
    data: bytes,
    headers: Mapping[str, str] | None,
) -> Answer:
    """One request to ``up``'s ``path`` (a GET sends no body), with ``up``'s own headers."""
    if method == "POST":
        return await up.post(path, data, headers)
    assert up.pool is not None, "Upstream.start() opens the connection pool"
    sent = up.headers if not headers else {**up.headers, **headers}
    return await up.pool.request("GET", up.pool.path(path), b"", sent, up.timeouts())


async def _relay(
    up: Upstream,
    resp: Answer,
    t0: float,
    metrics: GatewayMetrics,
    rewrite: tuple[Rewrite, Callable[[], bytes]] | None,
    first: int | bytes,
    fmt: ErrorFormat,
) -> AsyncIterator[bytes]:
    events = 0
    timed = False
    finished = False
    try:
        async for chunk in resp.chunks():
            if not timed:  # the event that carries the first token
                if isinstance(first, bytes):
                    timed = first in chunk
                else:
                    events += chunk.count(b"\n\n")
                    timed = events >= first
                if timed:
                    metrics.upstream_ttft.labels(up.name).observe(time.perf_counter() - t0)
                    if (hop := CURRENT.get()) is not None:
                        hop.mark(FIRST_TOKEN)
            yield rewrite[0](chunk) if rewrite is not None else chunk
        if rewrite is not None:
            yield rewrite[1]()
        finished = True
    except HopError as exc:
        # headers are gone already: end the stream the way the API's clients read errors
        yield stream_error(fmt, f"upstream {up.name!r} broke off the stream ({exc})")
    finally:
        if (hop := CURRENT.get()) is not None:
            hop.close(UPSTREAM)
        if finished:  # read to its end: the connection goes back to the pool for the next
            resp.release()
        else:  # a disconnected client lands here too: closing makes vLLM abort the request
            resp.close()


async def _whole(
    up: Upstream, resp: Answer, headers: dict[str, str], rewrite: Rewrite | None, fmt: ErrorFormat
) -> Response:
    """A whole answer, read, then checked and rewritten (a 200) or scrubbed (an error); a
    200 past the cap that needs no rewriting is passed on as it comes (:func:`_pass_on`)."""
    try:
        parts, whole = await resp.read_capped()
        if not whole and resp.status == 200 and rewrite is None:
            return await _pass_on(up, resp, parts, headers, fmt)
    except HopError as exc:
        return error_response(fmt, 502, f"upstream {up.name!r} broke off its answer ({exc})")
    if not whole:  # an error's body is scrubbed, a translated one parsed: both need it whole
        resp.close()
        mb = f"{resp.cap / (1 << 20):g} MB"
        return error_response(
            fmt, 502, f"upstream {up.name!r} answered more than {mb} (gateway.max_answer_mb)"
        )
    body = b"".join(parts)
    del parts  # the joined copy is the one kept
    if resp.status != 200:
        body = up.scrub(body)
    else:
        try:
            body = _json_object(body) if rewrite is None else rewrite(body)
        except BadAnswer as exc:
            return error_response(fmt, 502, f"upstream {up.name!r} answered 200 with {exc}")
    if (hop := CURRENT.get()) is not None:
        hop.close(UPSTREAM)
    return Response(body, status_code=resp.status, headers=headers)


async def _pass_on(
    up: Upstream, resp: Answer, parts: list[bytes], headers: dict[str, str], fmt: ErrorFormat
) -> Response:
    """A 200 answer too large to hold (``parts`` read so far), passed on as it comes if it
    opens a JSON object: all that can be checked of a body never held whole."""
    try:
        first = await _first_byte(resp, parts)
    except BaseException:
        resp.close()  # broken off, or the client left: vLLM aborts the request
        raise
    if first != b"{":
        resp.close()
        # no first byte: only whitespace as far as the cap let it be read
        what = f"opens with {first!r}" if first else "opens with nothing but whitespace"
        return error_response(
            fmt,
            502,
            f"upstream {up.name!r} answered 200 with a body that is not a JSON object (it {what})",
        )
    if (length := resp.headers.get("content-length")) is not None:
        headers["content-length"] = length
    return StreamingResponse(_through(up, resp, parts), status_code=200, headers=headers)


async def _first_byte(resp: Answer, parts: list[bytes]) -> bytes:
    """The body's first byte past JSON whitespace, reading on into ``parts`` as far as that
    takes; b"" if the body, or its first ``resp.cap`` bytes, end before one."""
    for part in parts:
        if (found := _NOT_SPACE.search(part)) is not None:
            return found.group()
    size = sum(map(len, parts))
    async with aclosing(resp.chunks()) as chunks:
        async for chunk in chunks:
            parts.append(chunk)
            if (found := _NOT_SPACE.search(chunk)) is not None:
                return found.group()
            size += len(chunk)
            if size > resp.cap:
                break
    return b""


async def _through(up: Upstream, resp: Answer, parts: list[bytes]) -> AsyncIterator[bytes]:
    """``parts``, then the rest of the answer as it arrives; an upstream that breaks off
    ends it with :class:`CutShort` (the client's connection closes: no valid end can
    follow part of a JSON object)."""
    relayed = 0
    finished = False
    try:
        parts.reverse()  # popped from its end: each part is let go of once it is sent
        while parts:
            part = parts.pop()
            relayed += len(part)
            yield part
        async for chunk in resp.chunks():
            relayed += len(chunk)
            yield chunk
        finished = True
    except HopError as exc:
        log.warning(
            "upstream %r broke off a whole answer passed on as it came (past "
            "gateway.max_answer_mb) after %d bytes; the client's connection is closed (%s)",
            up.name,
            relayed,
            exc,
        )
        raise CutShort from None
    finally:
        if (hop := CURRENT.get()) is not None:
            hop.close(UPSTREAM)
        if finished:
            resp.release()
        else:  # broken off, or the client left: closing makes vLLM abort the request
            resp.close()


def answer_object(body: bytes) -> dict[str, Any]:
    """An upstream's whole answer parsed, if it is a JSON object (what every API answers),
    else :class:`BadAnswer`: a client SDK would fail on it with less to go on than a 502
    that says what came.

    >>> answer_object(b'{"id": "x"}')
    {'id': 'x'}
    """
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadAnswer(f"a body that is not JSON ({exc})") from None
    if not isinstance(answer, dict):
        raise BadAnswer(f"a JSON {type(answer).__name__}, not an object")
    return answer


def _json_object(body: bytes) -> bytes:
    """``body`` as it came, once :func:`answer_object` found it a JSON object."""
    answer_object(body)
    return body


def _unexpected_type(content_type: str | None, stream: bool) -> str | None:
    """What is wrong with a 200 answer of ``content_type`` to a request that asked for a
    stream (or not), or None. No content type at all is taken at its word.

    >>> _unexpected_type("text/html; charset=utf-8", stream=True)
    'text/html; charset=utf-8, not an event stream'
    >>> _unexpected_type("application/json", stream=False) is None
    True
    """
    if content_type is None:
        return None
    media = content_type.split(";", 1)[0].strip().lower()
    if stream:
        return None if media == "text/event-stream" else f"{content_type}, not an event stream"
    if media == "application/json" or media.endswith("+json"):
        return None
    return f"{content_type}, not JSON"


def token_event(path: str) -> int | bytes:
    """Which SSE event of a stream from ``path`` carries the first token: its number, or
    bytes that only such an event holds (a delta; Anthropic and Responses streams open
    with several events of bookkeeping).

    >>> token_event("/chat/completions"), token_event("/completions"), token_event("/responses")
    (2, 1, b'.delta"')
    """
    if path.endswith("/chat/completions"):
        return 2  # a chat stream opens with a role chunk
    if path.endswith("/messages"):
        return b'_delta"'  # content_block_delta: text_delta, input_json_delta, thinking_delta
    if path.endswith("/responses"):
        return b'.delta"'  # response.output_text.delta, ….function_call_arguments.delta
    return 1
