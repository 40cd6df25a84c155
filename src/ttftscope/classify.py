"""Classify request failures: one place decides kind, message and hint for each.

Used by :mod:`ttftscope.client` (streamed requests) and :mod:`ttftscope.ping`. ``kind`` is one of
the ``kind`` labels of :mod:`ttftscope.errors`; :func:`to_exception` maps it to the exception.

>>> f = classify_status(401, {}, b'{"error": {"message": "bad key"}}', "http://h/v1/models")
>>> f.kind, to_exception(f).exit_code
('auth_error', 7)
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from ttftscope import errors

__all__ = [
    "RequestFailure",
    "classify_exception",
    "classify_status",
    "not_an_api",
    "to_exception",
]

_HINT_BASE_URL = "base_url should end in /v1, e.g. http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class RequestFailure:
    """A classified failure; ``kind`` is one of the ``kind`` labels of :mod:`ttftscope.errors`."""

    kind: str
    message: str
    hint: str | None = None
    status: int | None = None
    retry_after: str | None = None


def _causes(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def classify_exception(
    exc: BaseException, url: str, timeout_s: float, *, mid_stream_events: int | None = None
) -> RequestFailure:
    """Classify a transport exception from httpx (refused, DNS, TLS, timeout, dropped stream).

    >>> classify_exception(httpx.ConnectTimeout("x"), "http://h/v1", 5).kind
    'timeout'
    """
    chain = _causes(exc)
    if any(isinstance(e, httpx.TimeoutException) for e in chain):
        where = "before answering" if mid_stream_events is None else "mid-stream"
        return RequestFailure(
            "timeout", f"{url} sent nothing for {timeout_s:g} s {where} ({type(exc).__name__})",
            hint="raise api.timeout_seconds, or check that the server is not overloaded or stuck",
        )
    if mid_stream_events is not None:
        return RequestFailure(
            "stream_error",
            f"the connection to {url} dropped mid-stream after {mid_stream_events} events: {exc}",
            hint="the server may have crashed or a proxy cut the stream; check the server's log",
        )
    host = httpx.URL(url).host
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return RequestFailure(
            "tls_error", f"TLS handshake with {host} failed: {exc}",
            hint="use http:// for a plain-HTTP server (vLLM serves plain HTTP by default), "
            "or fix the certificate",
        )
    if any(isinstance(e, socket.gaierror) for e in chain):
        return RequestFailure(
            "dns_failure", f"cannot resolve host {host!r} in {url}: {exc}",
            hint="check the host name in base_url",
        )
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return RequestFailure(
            "connection_refused", f"connection refused by {url}",
            hint="is the server running? start one with `ttftscope local-server start`",
        )
    return RequestFailure("connect_error", f"cannot reach {url}: {type(exc).__name__}: {exc}",
                          hint="check base_url and that the server is reachable")


def _server_message(body: bytes, ctype: str) -> str:
    if "html" in ctype or body.lstrip()[:1] == b"<":
        return "(an HTML page)"
    try:
        obj = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return " ".join(body.decode("utf-8", "replace").split())[:200] or "(empty body)"
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        for value in (err, obj.get("message"), obj.get("detail")):
            if value:
                return str(value)
    return json.dumps(obj)[:200]


def classify_status(
    status: int, headers: Mapping[str, str], body: bytes, url: str
) -> RequestFailure:
    """Classify an error status with the server's own message (OpenAI error JSON or text).

    >>> classify_status(429, {"retry-after": "3"}, b'{"error":{"message":"slow down"}}', "u")
    ... # doctest: +NORMALIZE_WHITESPACE
    RequestFailure(kind='rate_limited', message='u is rate limiting (HTTP 429, Retry-After: 3):
    slow down', hint='wait 3 s, or lower --request-rate / --max-concurrency', status=429,
    retry_after='3')
    """
    said = _server_message(body, headers.get("content-type", ""))
    if status in (401, 403):
        return RequestFailure("auth_error", f"{url} rejected the API key (HTTP {status}): {said}",
                              hint="check api.api_key / OPENAI_API_KEY", status=status)
    if status == 404:
        return RequestFailure("not_found", f"{url} answered 404: {said}",
                              hint="check the model name (`ttftscope ping` lists them) and "
                              + _HINT_BASE_URL, status=status)
    if status == 429:
        ra = headers.get("retry-after")
        return RequestFailure(
            "rate_limited",
            f"{url} is rate limiting (HTTP 429, Retry-After: {ra or 'not set'}): {said}",
            hint=f"wait {ra or 'a while'} s, or lower --request-rate / --max-concurrency",
            status=status, retry_after=ra)
    if status >= 500:
        return RequestFailure("server_error", f"{url} failed with HTTP {status}: {said}",
                              hint="the server is broken or overloaded; check its log",
                              status=status)
    if 200 <= status < 300:
        return not_an_api(headers.get("content-type", ""), body, url)
    return RequestFailure("http_error", f"{url} rejected the request (HTTP {status}): {said}",
                          hint="the server did not accept the request body; see its message",
                          status=status)


def not_an_api(ctype: str, body: bytes, url: str) -> RequestFailure:
    """A 2xx answer that is not what an OpenAI-compatible API sends (HTML, plain text, ...)."""
    what = ctype.split(";")[0].strip() or "no content type"
    if "json" in what:
        detail = f"a JSON answer instead of an event stream: {_server_message(body, what)}"
        return RequestFailure("bad_response", f"{url} sent {detail}",
                              hint="the server ignored stream=true; is it OpenAI-compatible?")
    return RequestFailure(
        "bad_response",
        f"the base URL points at something that is not an OpenAI-compatible API: "
        f"got {what} from {url}", hint=_HINT_BASE_URL,
    )


_EXCEPTIONS: dict[str, type[errors.RequestError]] = {
    "timeout": errors.RequestTimeout,
    "bad_response": errors.BadResponse,
    "stream_error": errors.StreamError,
}
_STATUS_EXCEPTIONS: dict[str, type[errors.HTTPStatusError]] = {
    "auth_error": errors.AuthError,
    "not_found": errors.ModelNotFound,
    "server_error": errors.ServerError,
    "http_error": errors.HTTPStatusError,
}


def to_exception(f: RequestFailure) -> errors.RequestError:
    """Map a classified failure to its exception (and thereby its exit code)."""
    if f.kind in ("connection_refused", "dns_failure", "tls_error", "connect_error"):
        return errors.ConnectError(f.message, hint=f.hint, kind=f.kind)
    if f.kind == "rate_limited":
        return errors.RateLimited(f.message, status=f.status or 429,
                                  retry_after=f.retry_after, hint=f.hint)
    if f.kind in _STATUS_EXCEPTIONS:
        return _STATUS_EXCEPTIONS[f.kind](f.message, status=f.status or 0, hint=f.hint)
    return _EXCEPTIONS.get(f.kind, errors.RequestError)(f.message, hint=f.hint)

