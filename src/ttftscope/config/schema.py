"""The settings schema: pydantic models, key names, aliases and human type names.

Kept apart from :mod:`ttftscope.config` so the loader and the file readers can share
the key tables without import cycles. Users import everything from ``ttftscope.config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class Source:
    """Where one effective value came from.

    ``detail`` is the text shown to users, e.g. ``"config.toml:12 [profiles.fast]"``,
    ``"env TTFTSCOPE_API__BASE_URL"``, ``"flag --base-url"`` or ``"default"``.

    >>> str(Source("env", "env OPENAI_API_KEY"))
    'env OPENAI_API_KEY'
    """

    kind: Literal["default", "file", "env", "flag"]
    detail: str
    path: Path | None = None
    line: int | None = None
    profile: str | None = None

    def __str__(self) -> str:
        return self.detail


def root_url(base_url: str) -> str:
    """The server root next to an OpenAI-style base URL (a trailing ``/v1`` is dropped).

    ``/metrics``, ``/tokenize`` and ``/health`` live there on vLLM and SGLang.

    >>> root_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    """
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def derive_metrics_url(base_url: str) -> str:
    """The Prometheus endpoint next to an OpenAI-style base URL.

    >>> derive_metrics_url("http://127.0.0.1:8000/v1")
    'http://127.0.0.1:8000/metrics'
    """
    return root_url(base_url) + "/metrics"


def check_base_url(url: str) -> str:
    """Reject URLs that are not an API base; return the URL without a trailing slash.

    >>> check_base_url("http://host:8000/v1/")
    'http://host:8000/v1'
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must start with http:// or https:// and name a host")
    if parts.query:
        raise ValueError("must not contain a query string ('?...')")
    path = parts.path.rstrip("/")
    for tail in ("/chat/completions", "/completions"):
        if path.endswith(tail):
            raise ValueError(f"must be the API base, not the endpoint (it ends in {tail})")
    return url.rstrip("/")


def _check_http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must start with http:// or https:// and name a host")
    return url


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ApiSettings(_Section):
    base_url: str = DEFAULT_BASE_URL
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(
        default=600.0, gt=0, validation_alias=AliasChoices("timeout_seconds", "timeout")
    )
    max_retries: int = Field(default=0, ge=0)
    metrics_url: str = derive_metrics_url(DEFAULT_BASE_URL)

    @model_validator(mode="before")
    @classmethod
    def _derive_metrics(cls, data: Any) -> Any:
        # Derived here (not in the loader) so ApiSettings(base_url=...) alone is consistent.
        if isinstance(data, dict) and data.get("metrics_url") is None:
            base = data.get("base_url", DEFAULT_BASE_URL)
            if isinstance(base, str):
                data = {**data, "metrics_url": derive_metrics_url(base)}
        return data

    @field_validator("base_url")
    @classmethod
    def _base(cls, value: str) -> str:
        return check_base_url(value)

    @field_validator("metrics_url")
    @classmethod
    def _metrics(cls, value: str) -> str:
        return _check_http_url(value)


class ModelSettings(_Section):
    default: str | None = Field(
        default=None, min_length=1, validation_alias=AliasChoices("default", "name")
    )
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=16, ge=1)


class DebugSettings(_Section):
    log_request_timing: bool = False
    log_token_count: bool = False


class ObservabilitySettings(_Section):
    record_ttft: bool = True
    record_tokenize_ms: bool = True
    record_queue_ms: bool = True


class TokenizerSettings(_Section):
    path: Path | None = None


class Settings(BaseModel):
    """All effective settings. Build them with :func:`ttftscope.config.load_settings`.

    >>> Settings().api.metrics_url
    'http://127.0.0.1:8000/metrics'
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    api: ApiSettings = ApiSettings()
    model: ModelSettings = ModelSettings()
    debug: DebugSettings = DebugSettings()
    observability: ObservabilitySettings = ObservabilitySettings()
    tokenizer: TokenizerSettings = TokenizerSettings()


SECTIONS: dict[str, type[_Section]] = {
    "api": ApiSettings,
    "model": ModelSettings,
    "debug": DebugSettings,
    "observability": ObservabilitySettings,
    "tokenizer": TokenizerSettings,
}

# alias (dotted) -> canonical (dotted)
ALIASES: dict[str, str] = {"api.timeout": "api.timeout_seconds", "model.name": "model.default"}

KEYS: list[str] = [f"{s}.{f}" for s, m in SECTIONS.items() for f in m.model_fields]
ALL_NAMES: set[str] = set(KEYS) | set(ALIASES)

SECRET_KEYS: frozenset[str] = frozenset({"api.api_key"})

# What a value must look like, in words a user can act on.
EXPECTED: dict[str, str] = {
    "api.base_url": 'a URL string like "http://host:8000/v1"',
    "api.api_key": "a string",
    "api.timeout_seconds": "a positive number of seconds, e.g. 600",
    "api.max_retries": "a whole number >= 0, e.g. 2",
    "api.metrics_url": 'a URL string like "http://host:8000/metrics"',
    "model.default": 'a model name string, e.g. "Qwen/Qwen2.5-0.5B-Instruct"',
    "model.temperature": "a number >= 0, e.g. 0.0",
    "model.max_tokens": "a whole number >= 1, e.g. 16",
    "debug.log_request_timing": "true or false",
    "debug.log_token_count": "true or false",
    "observability.record_ttft": "true or false",
    "observability.record_tokenize_ms": "true or false",
    "observability.record_queue_ms": "true or false",
    "tokenizer.path": "a path string",
}

# CLI flag names shown as sources; keys without an entry show as --<section>-<field>.
FLAG_NAMES: dict[str, str] = {
    "api.base_url": "--base-url",
    "api.api_key": "--api-key",
    "api.timeout_seconds": "--timeout",
    "api.max_retries": "--max-retries",
    "api.metrics_url": "--metrics-url",
    "model.default": "--model",
    "model.temperature": "--temperature",
    "model.max_tokens": "--max-tokens",
    "tokenizer.path": "--tokenizer",
}


def canonical(key: str) -> str:
    """The canonical dotted name of a key or alias.

    >>> canonical("api.timeout")
    'api.timeout_seconds'
    """
    return ALIASES.get(key, key)


def flag_name(key: str) -> str:
    """The command-line flag shown as the source of ``key``.

    >>> flag_name("model.default")
    '--model'
    """
    return FLAG_NAMES.get(key, "--" + key.replace(".", "-").replace("_", "-"))
