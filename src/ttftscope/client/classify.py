"""Classify request failures: one place decides kind, message and hint for each.

Used by :mod:`.stream` (streamed requests), :mod:`.http_json` (JSON calls) and the bench's
aiohttp transport. Failures below HTTP arrive in the neutral vocabulary
(:class:`~ttftscope.errors.TransportFailure`, each HTTP stack mapping its own exceptions onto
it once); HTTP statuses and answers that are not an API are read here.
:func:`to_exception` maps a failure's :class:`~ttftscope.errors.FailureKind` to its exception.

>>> f = classify_status(401, {}, b'{"error": {"message": "bad key"}}', "http://h/v1/models")
>>> str(f.kind), to_exception(f).exit_code
('auth_error', 7)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ttftscope import errors
from ttftscope.errors import FailureKind, TransportFailure
from ttftscope.records import clean_text

__all__ = [
    "JSON_ERRORS",
    "RequestFailure",
    "TransportFault",
    "classify_status",
    "classify_transport",
    "failure_kind",
    "json_problem",
    "not_an_api",
    "server_text",
    "to_exception",
]

_HINT_BASE_URL = "base_url should end in /v1, e.g. http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class RequestFailure:
    """A classified failure: its kind, a message that says what happened, and a hint;
    ``transport`` how it failed below HTTP, if it did."""

    kind: FailureKind
    message: str
    hint: str | None = None
    status: int | None = None
    retry_after: str | None = None
    transport: TransportFailure | None = None


@dataclass(frozen=True)
class TransportFault:
    """A failure below HTTP: the neutral :class:`~ttftscope.errors.TransportFailure`, and the
    transport's own words for it (its exception's name and message), for the message."""

    failure: TransportFailure
    error: str
    text: str


# before the answer began: an exchange that broke off is as good as no connection
_KINDS: dict[TransportFailure, FailureKind] = {
    TransportFailure.REFUSED: FailureKind.CONNECTION_REFUSED,
    TransportFailure.DNS: FailureKind.DNS_FAILURE,
    TransportFailure.TLS: FailureKind.TLS_ERROR,
    TransportFailure.CONNECT: FailureKind.CONNECT_ERROR,
    TransportFailure.TIMEOUT: FailureKind.TIMEOUT,
    TransportFailure.BROKEN: FailureKind.CONNECT_ERROR,
}


def failure_kind(failure: TransportFailure, *, mid_stream: bool = False) -> FailureKind:
    """The kind a transport failure is recorded as; once the answer began, any failure but a
    timeout is a broken stream.

    >>> str(failure_kind(TransportFailure.BROKEN)), str(failure_kind(TransportFailure.BROKEN,
    ...                                                          mid_stream=True))
    ('connect_error', 'stream_error')
    """
    if mid_stream and failure is not TransportFailure.TIMEOUT:
        return FailureKind.STREAM_ERROR
    return _KINDS[failure]


def classify_transport(
    fault: TransportFault, url: str, timeout_s: float, *, mid_stream_events: int | None = None
) -> RequestFailure:
    """Classify a failure below HTTP (refused, DNS, TLS, timeout, dropped stream);
    ``mid_stream_events`` (the events read so far) once the answer's headers were in.

    >>> f = classify_transport(TransportFault(TransportFailure.TIMEOUT, "ReadTimeout", ""),
    ...                        "http://h/v1", 5)
    >>> str(f.kind), f.message
    ('timeout', 'http://h/v1 sent nothing for 5 s before answering (ReadTimeout)')
    """
    failure = fault.failure
    kind = failure_kind(failure, mid_stream=mid_stream_events is not None)
    if kind is FailureKind.TIMEOUT:
        where = "before answering" if mid_stream_events is None else "mid-stream"
        return RequestFailure(
            kind,
            f"{url} sent nothing for {timeout_s:g} s {where} ({fault.error})",
            hint="raise api.timeout_seconds, or check that the server is not overloaded or stuck",
            transport=failure,
        )
    if kind is FailureKind.STREAM_ERROR:
        return RequestFailure(
            kind,
            f"the connection to {url} dropped mid-stream after {mid_stream_events} events: "
            f"{fault.text}",
            hint="the server may have crashed or a proxy cut the stream; check the server's log",
            transport=failure,
        )
    message, hint = _unreachable(kind, fault, url)
    return RequestFailure(kind, message, hint=hint, transport=failure)


def _unreachable(kind: FailureKind, fault: TransportFault, url: str) -> tuple[str, str]:
    host = urlsplit(url).hostname or ""
    if kind is FailureKind.TLS_ERROR:
        return (
            f"TLS handshake with {host} failed: {fault.text}",
            "use http:// for a plain-HTTP server (vLLM serves plain HTTP by default), "
            "or fix the certificate",
        )
    if kind is FailureKind.DNS_FAILURE:
        return (
            f"cannot resolve host {host!r} in {url}: {fault.text}",
            "check the host name in base_url",
        )
    if kind is FailureKind.CONNECTION_REFUSED:
        return (
            f"connection refused by {url}",
            "is a server listening at that address? check base_url",
        )
    return (
        f"cannot reach {url}: {fault.error}: {fault.text}",
        "check base_url and that the server is reachable",
    )


# What json.loads raises for a server's bytes: JSONDecodeError, UnicodeDecodeError and the
# 4,300-digit limit on integers are ValueErrors; deep nesting exhausts the stack.
JSON_ERRORS = (ValueError, RecursionError)


def json_problem(exc: ValueError | RecursionError) -> str:
    """What made a server's JSON unreadable, as words that follow "an event that is".

    >>> json_problem(json.JSONDecodeError("Expecting value", "x", 0))
    'not JSON'
    >>> try:
    ...     json.loads("[" * 100_000)
    ... except JSON_ERRORS as exc:
    ...     json_problem(exc)
    'JSON nested too deeply to read'
    """
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to read"
    if isinstance(exc, json.JSONDecodeError):
        return "not JSON"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if "digits" in str(exc):
        return "JSON with a number too long to read (over 4,300 digits)"
    return f"JSON that cannot be read ({exc})"


def server_text(value: object, limit: int = 1000) -> str:
    """A value from a server's JSON as valid, printable text of at most ``limit`` characters.

    >>> server_text("engine \\ud800 dead"), server_text({"code": 7}), server_text("x" * 9, 4)
    ('engine � dead', '{"code": 7}', 'xxx…')
    """
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except JSON_ERRORS:
            text = f"(a {type(value).__name__} nested too deeply to show)"
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _raw_excerpt(body: bytes) -> str:
    return " ".join(body.decode("utf-8", "replace").split())[:200] or "(empty body)"


def _server_message(body: bytes, ctype: str) -> str:
    if "html" in ctype or body.lstrip()[:1] == b"<":
        return "(an HTML page)"
    try:
        obj = json.loads(body)
    except JSON_ERRORS as exc:
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
            return _raw_excerpt(body)  # plain text from a proxy or a framework: show it
        return f"({json_problem(exc)}) {_raw_excerpt(body)}"
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return server_text(err["message"])
        for value in (err, obj.get("message"), obj.get("detail")):
            if value:
                return server_text(value)
    return server_text(obj, 200)


def classify_status(
    status: int, headers: Mapping[str, str], body: bytes, url: str
) -> RequestFailure:
    """Classify an error status with the server's own message (OpenAI error JSON or text).

    >>> f = classify_status(429, {"retry-after": "3"}, b'{"error":{"message":"slow"}}', "u")
    >>> str(f.kind), f.retry_after, f.message
    ('rate_limited', '3', 'u is rate limiting (HTTP 429, Retry-After: 3): slow')
    """
    said = _server_message(body, headers.get("content-type", ""))
    if status in (401, 403):
        return RequestFailure(
            FailureKind.AUTH_ERROR,
            f"{url} rejected the API key (HTTP {status}): {said}",
            hint="check api.api_key / OPENAI_API_KEY",
            status=status,
        )
    if status == 404:
        return RequestFailure(
            FailureKind.NOT_FOUND,
            f"{url} answered 404: {said}",
            hint="check the model name (`ttftscope ping` lists them) and " + _HINT_BASE_URL,
            status=status,
        )
    if status == 429:
        ra = headers.get("retry-after")
        return RequestFailure(
            FailureKind.RATE_LIMITED,
            f"{url} is rate limiting (HTTP 429, Retry-After: {ra or 'not set'}): {said}",
            hint=f"wait {ra or 'a while'} s, or lower --request-rate / --max-concurrency",
            status=status,
            retry_after=ra,
        )
    if status >= 500:
        return RequestFailure(
            FailureKind.SERVER_ERROR,
            f"{url} failed with HTTP {status}: {said}",
            hint="the server is broken or overloaded; check its log",
            status=status,
        )
    if 200 <= status < 300:
        return not_an_api(headers.get("content-type", ""), body, url)
    return RequestFailure(
        FailureKind.HTTP_ERROR,
        f"{url} rejected the request (HTTP {status}): {said}",
        hint="the server did not accept the request body; see its message",
        status=status,
    )


def not_an_api(ctype: str, body: bytes, url: str) -> RequestFailure:
    """A 2xx answer that is not what an OpenAI-compatible API sends (HTML, plain text, ...)."""
    what = ctype.split(";")[0].strip() or "no content type"
    if "json" in what:
        detail = f"a JSON answer instead of an event stream: {_server_message(body, what)}"
        return RequestFailure(
            FailureKind.BAD_RESPONSE,
            f"{url} sent {detail}",
            hint="the server ignored stream=true; is it OpenAI-compatible?",
        )
    return RequestFailure(
        FailureKind.BAD_RESPONSE,
        f"the base URL points at something that is not an OpenAI-compatible API: "
        f"got {what} from {url}",
        hint=_HINT_BASE_URL,
    )


def to_exception(f: RequestFailure) -> errors.ServerRequestError:
    """Map a classified failure to its exception (and thereby its exit code)."""
    return errors.error_for(
        f.kind, f.message, hint=f.hint, status=f.status, retry_after=f.retry_after
    )
