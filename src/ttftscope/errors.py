"""One base error for the whole toolkit; every message says what went wrong and what to do.

Tree::

    TtftscopeError                  exit code 1 unless a subclass says otherwise
    ├── ConfigError                 bad config file, key, type, value or profile (exit 2)
    ├── ServerRequestError          a request to the server failed (exit 3..12, by kind)
    │   ├── ServerUnreachable       connection refused (4) / DNS failure (16) / TLS error (17)
    │   ├── RequestTimeout          no answer within api.timeout_seconds
    │   ├── ServerStatusError       4xx/5xx (AuthError, ModelNotFound, RateLimited, ServerError)
    │   ├── BadResponse             not JSON / HTML / not an OpenAI-style answer
    │   └── StreamBroken            stream dropped mid-way or an error event in-stream
    ├── MetricsError                /metrics unreachable or unparsable
    ├── TokenizerError              tokenizer file missing, unreadable or unsupported
    ├── LocalServerError            local vLLM could not be installed, built, started or stopped
    └── MissingExtra                a command needs an optional extra that is not installed (18)

The names differ from httpx's (``RequestError``, ``ConnectError``, ``HTTPStatusError``,
``StreamError``) so code that handles both reads unambiguously. Every request failure has a
:class:`FailureKind`; :func:`error_for` maps a kind to its exception (and so its exit code).

Below HTTP, every HTTP client here (httpx in ``client``, aiohttp in ``bench``, the gateway's
own hop) names how an exchange failed in one vocabulary, :class:`TransportFailure`, each
mapping its own exceptions onto it in one function; ``client.classify`` turns a
:class:`TransportFailure` (and the point it happened at) into a :class:`FailureKind`.

Messages never contain API keys: callers pass text through
:func:`ttftscope.config.redact.redact_text` where a key could appear (URLs, headers, server
echoes).
"""

from __future__ import annotations

import copy
import socket
import ssl
from enum import StrEnum
from typing import Self


class FailureKind(StrEnum):
    """Why a request failed: stable labels, stored in records as their string values.

    >>> FailureKind("rate_limited") is FailureKind.RATE_LIMITED, str(FailureKind.TIMEOUT)
    (True, 'timeout')
    """

    CONNECTION_REFUSED = "connection_refused"
    CONNECT_ERROR = "connect_error"
    DNS_FAILURE = "dns_failure"
    TLS_ERROR = "tls_error"
    TIMEOUT = "timeout"
    HTTP_ERROR = "http_error"
    AUTH_ERROR = "auth_error"
    NOT_FOUND = "not_found"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    BAD_RESPONSE = "bad_response"
    STREAM_ERROR = "stream_error"
    REQUEST_ERROR = "request_error"


class TransportFailure(StrEnum):
    """How an HTTP exchange failed below the HTTP status, in words no one client owns.

    httpx's exceptions map onto it in ``ttftscope.httpx_failure``, aiohttp's in
    ``bench.send.transport``, and the gateway's hop raises its ``HopError`` with one.

    >>> TransportFailure("broken") is TransportFailure.BROKEN, str(TransportFailure.TLS)
    (True, 'tls')
    """

    REFUSED = "refused"  # nothing listens at the address
    DNS = "dns"  # the host name does not resolve
    TLS = "tls"  # the TLS handshake or the certificate check failed
    CONNECT = "connect"  # no connection, for another reason (no route, bad scheme, ...)
    TIMEOUT = "timeout"  # no connection, or no next byte, within the time allowed
    BROKEN = "broken"  # connected, but no whole answer: closed, reset, or not HTTP


# first match wins, in the order failures were always told apart
_OS_FAILURES: tuple[tuple[TransportFailure, type[BaseException]], ...] = (
    (TransportFailure.TLS, ssl.SSLError),
    (TransportFailure.DNS, socket.gaierror),
    (TransportFailure.REFUSED, ConnectionRefusedError),
)


def os_failure(exc: BaseException) -> TransportFailure | None:
    """What the operating system's error behind ``exc`` (its cause chain) says, if it names
    one: refused, DNS or TLS. Every client wraps these in its own exceptions.

    >>> err = RuntimeError("connect failed")
    >>> err.__cause__ = ConnectionRefusedError(111, "Connection refused")
    >>> os_failure(err), os_failure(TimeoutError())
    (<TransportFailure.REFUSED: 'refused'>, None)
    """
    chain = cause_chain(exc)
    for kind, types in _OS_FAILURES:
        if any(isinstance(e, types) for e in chain):
            return kind
    return None


def cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or while handling, outermost first.

    >>> try:
    ...     try:
    ...         raise OSError("inner")
    ...     except OSError as inner:
    ...         raise RuntimeError("outer") from inner
    ... except RuntimeError as outer:
    ...     [type(e).__name__ for e in cause_chain(outer)]
    ['RuntimeError', 'OSError']
    """
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


# No HTTP exchange happened: these are ServerUnreachable, each kind with its own exit code.
UNREACHABLE_KINDS: frozenset[FailureKind] = frozenset(
    {
        FailureKind.CONNECTION_REFUSED,
        FailureKind.CONNECT_ERROR,
        FailureKind.DNS_FAILURE,
        FailureKind.TLS_ERROR,
    }
)


class TtftscopeError(Exception):
    """Base of every error this toolkit raises on purpose.

    >>> str(TtftscopeError("model 'x' not found", hint="pick one of: y"))
    "model 'x' not found\\n  hint: pick one of: y"
    """

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  hint: {hint}")

    def with_hint(self, hint: str) -> Self:
        """The same error with another hint (a caller that knows more says what to do).

        >>> print(TtftscopeError("refused", hint="start it").with_hint("it runs elsewhere"))
        refused
          hint: it runs elsewhere
        """
        other = copy.copy(self)
        other.hint = hint
        other.args = (f"{self.message}\n  hint: {hint}",)
        return other


class ConfigError(TtftscopeError):
    """Configuration could not be loaded or is invalid.

    >>> ConfigError("bad key", hint="remove it").exit_code
    2
    """

    exit_code = 2


class ServerRequestError(TtftscopeError):
    """A request to the server failed; ``kind`` is a stable machine-readable label.

    >>> str(ServerRequestError("failed").kind), ServerRequestError("failed").exit_code
    ('request_error', 3)
    """

    exit_code = 3
    kind: FailureKind = FailureKind.REQUEST_ERROR


_UNREACHABLE_EXIT = {FailureKind.DNS_FAILURE: 16, FailureKind.TLS_ERROR: 17}


class ServerUnreachable(ServerRequestError):
    """No HTTP exchange happened; ``kind`` says why, and each kind has its own exit code.

    >>> ServerUnreachable("x", kind=FailureKind.DNS_FAILURE).exit_code
    16
    """

    exit_code = 4
    kind = FailureKind.CONNECT_ERROR

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        kind: FailureKind = FailureKind.CONNECT_ERROR,
    ) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind
        self.exit_code = _UNREACHABLE_EXIT.get(kind, 4)


class RequestTimeout(ServerRequestError):
    """No answer (or no next byte of the stream) within api.timeout_seconds.

    >>> RequestTimeout("slow").exit_code
    5
    """

    exit_code = 5
    kind = FailureKind.TIMEOUT


class ServerStatusError(ServerRequestError):
    """The server answered with an error status.

    >>> ServerStatusError("HTTP 400", status=400).status
    400
    """

    exit_code = 6
    kind = FailureKind.HTTP_ERROR

    def __init__(self, message: str, *, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class AuthError(ServerStatusError):
    """401/403: the key is missing, wrong or not allowed this model.

    >>> AuthError("HTTP 401", status=401).exit_code
    7
    """

    exit_code = 7
    kind = FailureKind.AUTH_ERROR


class ModelNotFound(ServerStatusError):
    """404: usually a model name the server does not serve.

    >>> ModelNotFound("HTTP 404", status=404).exit_code
    8
    """

    exit_code = 8
    kind = FailureKind.NOT_FOUND


class RateLimited(ServerStatusError):
    """429: the server or a gateway in front of it is throttling; keeps Retry-After.

    >>> RateLimited("HTTP 429", retry_after="3").retry_after
    '3'
    """

    exit_code = 9
    kind = FailureKind.RATE_LIMITED

    def __init__(
        self,
        message: str,
        *,
        status: int = 429,
        retry_after: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, status=status, hint=hint)
        self.retry_after = retry_after


class ServerError(ServerStatusError):
    """5xx: the server failed; its log says why.

    >>> ServerError("HTTP 500", status=500).exit_code
    10
    """

    exit_code = 10
    kind = FailureKind.SERVER_ERROR


class BadResponse(ServerRequestError):
    """An answer that is not an OpenAI-compatible API (HTML, non-JSON, missing fields).

    >>> BadResponse("an HTML page").exit_code
    11
    """

    exit_code = 11
    kind = FailureKind.BAD_RESPONSE


class StreamBroken(ServerRequestError):
    """The stream broke off or carried an error event.

    >>> StreamBroken("dropped").exit_code
    12
    """

    exit_code = 12
    kind = FailureKind.STREAM_ERROR


class MetricsError(TtftscopeError):
    """/metrics unreachable, missing or unparsable.

    >>> MetricsError("no /metrics").exit_code
    13
    """

    exit_code = 13
    # set when the scrape failed below HTTP: the same words every HTTP client here uses
    transport: TransportFailure | None = None


class TokenizerError(TtftscopeError):
    """A tokenizer file is missing, unreadable or of an unsupported kind.

    >>> TokenizerError("no tokenizer.json").exit_code
    14
    """

    exit_code = 14


class LocalServerError(TtftscopeError):
    """The local vLLM could not be installed, built, started or stopped.

    >>> LocalServerError("did not start").exit_code
    15
    """

    exit_code = 15


class MissingExtra(TtftscopeError):
    """A command needs an optional extra (``ttftscope[gateway]``, …) that is not installed.

    >>> print(MissingExtra("bench", ("aiohttp",)))
    `ttftscope bench` needs aiohttp, which is not installed
      hint: pip install 'ttftscope[bench]'  (or 'ttftscope[all]')
    >>> MissingExtra("report", ("plotly",)).exit_code
    18
    """

    exit_code = 18

    def __init__(self, extra: str, missing: tuple[str, ...], *, command: str | None = None) -> None:
        self.extra = extra
        self.missing = missing
        names = ", ".join(missing)
        verb = "is" if len(missing) == 1 else "are"
        super().__init__(
            f"`ttftscope {command or extra}` needs {names}, which {verb} not installed",
            hint=f"pip install 'ttftscope[{extra}]'  (or 'ttftscope[all]')",
        )


_STATUS_ERRORS: dict[FailureKind, type[ServerStatusError]] = {
    FailureKind.AUTH_ERROR: AuthError,
    FailureKind.NOT_FOUND: ModelNotFound,
    FailureKind.SERVER_ERROR: ServerError,
    FailureKind.HTTP_ERROR: ServerStatusError,
}
_OTHER_ERRORS: dict[FailureKind, type[ServerRequestError]] = {
    FailureKind.TIMEOUT: RequestTimeout,
    FailureKind.BAD_RESPONSE: BadResponse,
    FailureKind.STREAM_ERROR: StreamBroken,
}


def error_for(
    kind: FailureKind,
    message: str,
    *,
    hint: str | None = None,
    status: int | None = None,
    retry_after: str | None = None,
) -> ServerRequestError:
    """The exception (and so the exit code) for a classified request failure.

    >>> error_for(FailureKind.RATE_LIMITED, "slow down", retry_after="3").exit_code
    9
    """
    if kind in UNREACHABLE_KINDS:
        return ServerUnreachable(message, hint=hint, kind=kind)
    if kind is FailureKind.RATE_LIMITED:
        return RateLimited(message, status=status or 429, retry_after=retry_after, hint=hint)
    if kind in _STATUS_ERRORS:
        return _STATUS_ERRORS[kind](message, status=status or 0, hint=hint)
    return _OTHER_ERRORS.get(kind, ServerRequestError)(message, hint=hint)
