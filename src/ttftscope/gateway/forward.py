"""Send a request upstream and relay the answer: raw bytes for streams, errors as they are.

Upstream errors (4xx, 429 with ``Retry-After``, 5xx) reach the client with their status and
body. An upstream that cannot be reached is a 502, one that does not answer in time a 504,
both with an OpenAI-format error body. A client that disconnects closes the upstream
connection, which makes vLLM abort the request.

>>> openai_error(404, "no such model").status_code
404
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import orjson
from starlette.responses import Response, StreamingResponse

from ttftscope.gateway.hop import Answer, HopError
from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.upstreams import Upstream

_ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    413: "BadRequestError",
    502: "BadGatewayError",
    504: "TimeoutError",
}
_PASSED_HEADERS = ("content-type", "retry-after", "x-request-id")


def openai_error(status: int, message: str, *, param: str | None = None) -> Response:
    """An error in the shape OpenAI clients parse (``{"error": {"message", "type", ...}}``)."""
    body = {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "APIError"),
            "param": param,
            "code": status,
        }
    }
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


Rewrite = Callable[[bytes], bytes]


async def forward(
    up: Upstream,
    path: str,
    data: bytes,
    *,
    stream: bool,
    metrics: GatewayMetrics,
    rewrite_stream: tuple[Rewrite, Callable[[], bytes]] | None = None,
    rewrite_body: Rewrite | None = None,
) -> Response:
    """POST ``data`` to ``up``'s ``path`` and answer with what comes back.

    ``rewrite_stream`` (feed, close) turns upstream SSE into other SSE (completions → chat);
    ``rewrite_body`` does the same for a whole 200 answer.
    """
    t0 = time.perf_counter()
    try:
        resp = await up.post(path, data)
    except HopError as exc:
        if exc.kind == "timeout":
            return openai_error(504, f"upstream {up.name!r} did not answer in time ({exc})")
        return openai_error(502, f"upstream {up.name!r} is unreachable ({exc})")
    metrics.upstream_ttfb.labels(up.name).observe(time.perf_counter() - t0)
    headers = {k: v for k in _PASSED_HEADERS if (v := resp.headers.get(k)) is not None}
    if resp.status != 200 or not stream:
        try:
            body = await resp.read()
        except HopError as exc:
            return openai_error(502, f"upstream {up.name!r} broke off its answer ({exc})")
        if resp.status == 200 and rewrite_body is not None:
            body = rewrite_body(body)
        return Response(body, status_code=resp.status, headers=headers)
    # a chat stream opens with a role chunk; a completions stream's first event is a token
    token_event = 2 if path.endswith("/chat/completions") else 1
    return StreamingResponse(
        _relay(up, resp, t0, metrics, rewrite_stream, token_event),
        status_code=200,
        headers=headers,
        media_type="text/event-stream",
    )


async def _relay(
    up: Upstream,
    resp: Answer,
    t0: float,
    metrics: GatewayMetrics,
    rewrite: tuple[Rewrite, Callable[[], bytes]] | None,
    token_event: int,
) -> AsyncIterator[bytes]:
    events = 0
    finished = False
    try:
        async for chunk in resp.chunks():
            if events < token_event:  # the event that carries the first token
                events += chunk.count(b"\n\n")
                if events >= token_event:
                    metrics.upstream_ttft.labels(up.name).observe(time.perf_counter() - t0)
            yield rewrite[0](chunk) if rewrite is not None else chunk
        if rewrite is not None:
            yield rewrite[1]()
        finished = True
    except HopError as exc:
        # headers are gone already: end the stream the way OpenAI clients read errors
        err = {
            "error": {
                "message": f"upstream {up.name!r} broke off the stream ({exc})",
                "type": "BadGatewayError",
                "code": 502,
            }
        }
        yield b"data: " + orjson.dumps(err) + b"\n\n"
    finally:
        if finished:  # read to its end: the connection goes back to the pool for the next
            resp.release()
        else:  # a disconnected client lands here too: closing makes vLLM abort the request
            resp.close()
