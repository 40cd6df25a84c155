"""One base error for the whole toolkit; every message says what went wrong and what to do.

Tree::

    TtftscopeError                  exit code 1 unless a subclass says otherwise
    ├── ConfigError                 bad config file, key, type, value or profile (exit 2)
    ├── RequestError                a request to the server failed (exit 3..12, by kind)
    │   ├── ConnectError            connection refused / DNS failure / TLS error
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
    exit_code = 4
    kind = "connect_error"

    def __init__(self, message: str, *, hint: str | None = None, kind: str = "connect_error"):
        super().__init__(message, hint=hint)
        self.kind = kind  # connection_refused | dns_failure | tls_error | connect_error


class RequestTimeout(RequestError):
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
    exit_code = 7
    kind = "auth_error"


class ModelNotFound(HTTPStatusError):
    exit_code = 8
    kind = "not_found"


class RateLimited(HTTPStatusError):
    exit_code = 9
    kind = "rate_limited"

    def __init__(
        self, message: str, *, status: int = 429, retry_after: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, status=status, hint=hint)
        self.retry_after = retry_after


class ServerError(HTTPStatusError):
    exit_code = 10
    kind = "server_error"


class BadResponse(RequestError):
    exit_code = 11
    kind = "bad_response"


class StreamError(RequestError):
    exit_code = 12
    kind = "stream_error"


class MetricsError(TtftscopeError):
    exit_code = 13


class TokenizerError(TtftscopeError):
    exit_code = 14


class LocalServerError(TtftscopeError):
    exit_code = 15
