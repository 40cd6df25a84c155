"""Errors in the shape each API's clients parse: OpenAI's and Anthropic's.

Claude Code reads ``{"type": "error", "error": {"type", "message"}}``; the OpenAI SDK and
Codex read ``{"error": {"message", "type", "param", "code"}}``. Each route answers the
gateway's own errors (bad key, bad body, unknown model, unreachable upstream) in its API's
shape; upstream errors pass through as the upstream wrote them.

>>> error_response("anthropic", 401, "a key is required").body
b'{"type":"error","error":{"type":"authentication_error","message":"a key is required"}}'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import orjson
from starlette.responses import Response

ErrorFormat = Literal["openai", "anthropic"]

_OPENAI_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    405: "BadRequestError",
    408: "TimeoutError",
    413: "BadRequestError",
    431: "BadRequestError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "TimeoutError",
}
# https://docs.anthropic.com/en/api/errors: the types Claude Code tells apart
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "request_too_large",
    431: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def openai_error(
    status: int,
    message: str,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An error in the shape OpenAI clients parse (``{"error": {"message", "type", ...}}``).

    >>> openai_error(404, "no such model").status_code
    404
    """
    body = {
        "error": {
            "message": message,
            "type": _OPENAI_TYPES.get(status, "APIError"),
            "param": param,
            "code": status,
        }
    }
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def anthropic_error(
    status: int, message: str, *, headers: Mapping[str, str] | None = None
) -> Response:
    """An error in the Anthropic Messages API's shape.

    >>> anthropic_error(502, "upstream down").body
    b'{"type":"error","error":{"type":"api_error","message":"upstream down"}}'
    """
    kind = _ANTHROPIC_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def error_response(
    fmt: ErrorFormat, status: int, message: str, *, headers: Mapping[str, str] | None = None
) -> Response:
    """The error ``fmt``'s clients parse (``headers``: ``Retry-After`` on a 503)."""
    if fmt == "anthropic":
        return anthropic_error(status, message, headers=headers)
    return openai_error(status, message, headers=headers)


def stream_error(fmt: ErrorFormat, message: str, *, status: int = 502) -> bytes:
    """An SSE event that ends a stream whose headers are gone, in the API's own shape
    (``status``: the error status the answer would have had, 504 for a deadline).

    >>> stream_error("anthropic", "broke off")[:20]
    b'event: error\\ndata: {'
    """
    if fmt == "anthropic":
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        err = {"type": "error", "error": {"type": kind, "message": message}}
        return b"event: error\ndata: " + orjson.dumps(err) + b"\n\n"
    body = {
        "error": {"message": message, "type": _OPENAI_TYPES.get(status, "APIError"), "code": status}
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def api_format(path: str) -> ErrorFormat:
    """The error format of the API served at ``path`` (Anthropic's for ``/v1/messages``):
    the one place a format is read from a path, for answers made before a route is found
    (bounds, deadlines, 404, 405); each route of the app's table names its own, and
    ``tests/gateway/test_doors.py`` holds the two equal.

    >>> api_format("/v1/messages/count_tokens"), api_format("/v1/chat/completions")
    ('anthropic', 'openai')
    """
    return "anthropic" if path.startswith("/v1/messages") else "openai"


class BadRequest(Exception):
    """The client's request cannot be served; ``status``, a message that says why, and
    headers for the answer (``Retry-After`` on a 503)."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.headers = dict(headers or {})
