"""One base error for the whole toolkit; every message says what went wrong and what to do.

Tree::

    TtftscopeError                  exit code 1 unless a subclass says otherwise
    ├── ConfigError                 bad config file, key, type, value or profile (exit 2)
    ├── RequestError                a request to the server failed (exit 3..12, by kind)
    │   ├── ConnectError            connection refused (4) / DNS failure (16) / TLS error (17)
    │   ├── RequestTimeout          no answer within api.timeout_seconds
    │   ├── HTTPStatusError         4xx/5xx (AuthError, ModelNotFound, RateLimited, ServerError)
    │   ├── BadResponse             not JSON / HTML / not an OpenAI-style answer
    │   └── StreamError             stream dropped mid-way or an error event in-stream
    ├── MetricsError                /metrics unreachable or unparsable
    ├── TokenizerError              tokenizer file missing, unreadable or unsupported
    └── LocalServerError            local vLLM could not be installed, built, started or stopped

Messages never contain API keys: callers pass text through :func:`ttftscope.config.redact_text`
where a key could appear (URLs, headers, server echoes).
"""

from __future__ import annotations

from typing import ClassVar


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


class ConfigError(TtftscopeError):
    """Configuration could not be loaded or is invalid."""

    exit_code = 2


class RequestError(TtftscopeError):
    """A request to the server failed; ``kind`` is a stable machine-readable label."""

    exit_code = 3
    kind: str = "request_error"


class ConnectError(RequestError):
    """No HTTP exchange happened; ``kind`` says why, and each kind has its own exit code."""

    exit_code = 4
    kind = "connect_error"
    EXIT_CODES: ClassVar[dict[str, int]] = {
        "connection_refused": 4, "connect_error": 4, "dns_failure": 16, "tls_error": 17}

    def __init__(self, message: str, *, hint: str | None = None, kind: str = "connect_error"):
        super().__init__(message, hint=hint)
        self.kind = kind
        self.exit_code = self.EXIT_CODES.get(kind, 4)


class RequestTimeout(RequestError):
    """No answer (or no next byte of the stream) within api.timeout_seconds."""

    exit_code = 5
    kind = "timeout"


class HTTPStatusError(RequestError):
    """The server answered with an error status."""

    exit_code = 6
    kind = "http_error"

    def __init__(self, message: str, *, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class AuthError(HTTPStatusError):
    """401/403: the key is missing, wrong or not allowed this model."""

    exit_code = 7
    kind = "auth_error"


class ModelNotFound(HTTPStatusError):
    """404: usually a model name the server does not serve."""

    exit_code = 8
    kind = "not_found"


class RateLimited(HTTPStatusError):
    """429: the server or a gateway in front of it is throttling; keeps Retry-After."""

    exit_code = 9
    kind = "rate_limited"

    def __init__(
        self, message: str, *, status: int = 429, retry_after: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, status=status, hint=hint)
        self.retry_after = retry_after


class ServerError(HTTPStatusError):
    """5xx: the server failed; its log says why."""

    exit_code = 10
    kind = "server_error"


class BadResponse(RequestError):
    """An answer that is not an OpenAI-compatible API (HTML, non-JSON, missing fields)."""

    exit_code = 11
    kind = "bad_response"


class StreamError(RequestError):
    """The stream broke off or carried an error event."""

    exit_code = 12
    kind = "stream_error"


class MetricsError(TtftscopeError):
    """/metrics unreachable, missing or unparsable."""

    exit_code = 13


class TokenizerError(TtftscopeError):
    """A tokenizer file is missing, unreadable or of an unsupported kind."""

    exit_code = 14


class LocalServerError(TtftscopeError):
    """The local vLLM could not be installed, built, started or stopped."""

    exit_code = 15
