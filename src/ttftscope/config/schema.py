"""The settings schema: pydantic models, key names, aliases and human type names.

Kept apart from :mod:`.loader` so the loader and the file readers can share the key tables
without import cycles. What a wire value must look like is :mod:`.checks`'.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
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

from ttftscope.config.checks import check_api_key, check_base_url, check_http_url

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_TRACE_RECEIVER_PORT = 14318  # OTLP/HTTP is 4318; this one is ttftscope's own


@dataclass(frozen=True)
class Source:
    """Where one effective value came from.

    ``detail`` is the text shown to users, e.g. ``"config.toml:12 [profiles.fast]"``,
    ``"env TTFTSCOPE_API__BASE_URL"``, ``"flag --base-url"``, ``"default"`` or, for a value
    found by looking around (``local``), ``"local server (ttftscope local-server)"``.

    >>> str(Source("env", "env OPENAI_API_KEY"))
    'env OPENAI_API_KEY'
    """

    kind: Literal["default", "local", "file", "env", "flag"]
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


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port (where credentials may travel).

    >>> same_origin("http://h:8000/v1", "http://h:8000/metrics"), same_origin("http://h/v1", "https://h/v1")
    (True, False)
    """
    pa, pb = urlsplit(a), urlsplit(b)
    default = {"http": 80, "https": 443}
    port_a = pa.port or default.get(pa.scheme)
    port_b = pb.port or default.get(pb.scheme)
    return (pa.scheme, pa.hostname, port_a) == (pb.scheme, pb.hostname, port_b)


def derive_metrics_url(base_url: str) -> str:
    """The Prometheus endpoint next to an OpenAI-style base URL.

    >>> derive_metrics_url("http://127.0.0.1:8000/v1")
    'http://127.0.0.1:8000/metrics'
    """
    return root_url(base_url) + "/metrics"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ApiSettings(_Section):
    base_url: str = DEFAULT_BASE_URL
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        validation_alias=AliasChoices("timeout_seconds", "timeout"),
    )
    max_retries: int = Field(default=0, ge=0, le=100)
    metrics_url: str = derive_metrics_url(DEFAULT_BASE_URL)
    # credentials go to metrics_url only on the API's own origin, unless the user opts in
    metrics_auth: bool = False

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

    @field_validator("api_key")
    @classmethod
    def _key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_api_key(value.get_secret_value())
        return value

    @field_validator("metrics_url")
    @classmethod
    def _metrics(cls, value: str) -> str:
        return check_http_url(value)


class ModelSettings(_Section):
    default: str | None = Field(
        default=None, min_length=1, validation_alias=AliasChoices("default", "name")
    )
    temperature: float = Field(default=0.0, ge=0, le=100, allow_inf_nan=False)
    max_tokens: int = Field(default=16, ge=1, le=1_000_000)


class DebugSettings(_Section):
    log_request_timing: bool = False
    log_token_count: bool = False


class ObservabilitySettings(_Section):
    record_ttft: bool = True
    record_tokenize_ms: bool = True
    record_queue_ms: bool = True
    # where ttftscope.instrument(client) appends its records (instrument.jsonl); unset: kept
    # in memory only
    records_dir: Path | None = None
    # also write each request body (prompt text!) to requests.jsonl beside the records, so
    # doctor and prefix-diff can find dynamic prefixes; off unless the user asks
    log_requests: bool = False
    # where our spans go (OTLP/HTTP, e.g. "http://127.0.0.1:4318"; /v1/traces is added): unset,
    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT decide; none: off
    otlp_endpoint: str | None = None

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    # where ttftscope's OTLP/HTTP trace receiver listens on 127.0.0.1 while a probe or bench
    # reads vLLM's per-request spans; `local-server start` points vLLM's exporter at it.
    # Not 4317/4318, so a collector there keeps its ports; 0: no receiver, no traces
    trace_receiver_port: int = Field(default=DEFAULT_TRACE_RECEIVER_PORT, ge=0, le=65535)
    # probe and bench run the receiver: "auto" when the target is the local server started
    # with traces, "on" always (a vLLM you started with --otlp-traces-endpoint to the port)
    read_traces: Literal["auto", "on", "off"] = "auto"


class TokenizerSettings(_Section):
    path: Path | None = None


class UpstreamSettings(_Section):
    """One server behind the gateway (a ``[gateway.upstreams.NAME]`` table)."""

    base_url: str
    # tokenizer + chat template of the served model (ids mode needs it)
    model_dir: Path | None = None
    mode: Literal["ids", "text"] = "ids"
    # how ids reach the server: chat with kv_transfer_params, or /v1/completions; auto probes
    api: Literal["auto", "chat-ids", "completions"] = "auto"
    # chat-ids upstreams: chats /v1/completions answers exactly go there (a little faster);
    # only for servers without --reasoning-parser and with the default --response-role
    plain_chats: Literal["chat-ids", "completions"] = "chat-ids"
    # name of the environment variable holding this upstream's key (never the key itself)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # served model names; empty: read from the upstream's /v1/models
    models: tuple[str, ...] = ()
    timeout_seconds: float = Field(default=600.0, gt=0, le=86_400, allow_inf_nan=False)

    @field_validator("base_url")
    @classmethod
    def _base(cls, value: str) -> str:
        return check_base_url(value)


class GatewaySettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8100, ge=1, le=65535)
    cache_mb: int = Field(default=512, ge=1, le=1_000_000)
    upstreams: dict[str, UpstreamSettings] = Field(default_factory=dict)
    # ask the upstream for its own rendering of every Nth request (0: never); on by default
    # at a low rate: a mismatch turns that request's shape classes to text
    verify_every: int = Field(default=500, ge=0)
    # and of the first N requests of each (upstream, API, model) (0: none)
    verify_first: int = Field(default=3, ge=0)
    # seconds between re-reads of each ids upstream's /version (a change: checked again); 0: off
    version_poll_seconds: float = Field(default=60.0, ge=0, le=86400, allow_inf_nan=False)
    # re-check every Nth incremental encode against a full one, off the hot path (0: never)
    shadow_every: int = Field(default=1000, ge=0)
    max_body_mb: float = Field(default=64.0, gt=0, le=4096, allow_inf_nan=False)
    # a request's head (request line and headers) in KB, and its number of headers: past
    # either the client gets a 431 and the connection closes
    max_header_kb: int = Field(default=64, ge=1, le=65536)
    max_headers: int = Field(default=100, ge=1, le=10_000)
    # seconds from a connection's opening (or a request's first byte) to its last header,
    # and from there to the body's last byte; past either a 408 and the connection closes
    header_timeout_s: float = Field(default=15.0, gt=0, le=3600, allow_inf_nan=False)
    body_timeout_s: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    # seconds a keep-alive connection waits for its next request (longer than the ~5 s
    # clients keep theirs: a client reusing a connection the gateway is closing fails)
    idle_timeout_s: float = Field(default=15.0, gt=0, le=3600, allow_inf_nan=False)
    # seconds one exchange may take, a stream to its last event included: a 100K-token
    # agent turn can stream for many minutes on a busy server
    request_timeout_s: float = Field(default=3600.0, gt=0, le=86400, allow_inf_nan=False)
    # MB of a whole (non-stream) upstream answer the gateway holds. Past it, a 200 it passes
    # on unchanged is relayed as it comes; an error body or an answer to translate is a 502.
    # Streams are relayed as they come and have no such cap
    max_answer_mb: float = Field(default=128.0, gt=0, le=4096, allow_inf_nan=False)
    # messages (or Responses input items) in one request: Claude Code sessions reach a few
    # thousand; rendering 20K messages alone takes ~0.3 s
    max_messages: int = Field(default=20_000, ge=1)
    # threads that encode and render long prompts off the event loop, and how many more such
    # jobs may wait for one; past that a request gets 503 + Retry-After instead of a stall
    encode_workers: int = Field(default=2, ge=1, le=64)
    encode_queue: int = Field(default=16, ge=0)
    # processes (started with the gateway) that encode prompts with over 32 KB not yet
    # cached, with a GIL of their own, scheduled only when nothing else wants the CPU
    # (Linux SCHED_IDLE); 0: on the encode_workers threads; "auto": 2 where os.cpu_count()
    # is 2 or more, else 0. benchmarks/gateway_soak.py, 2 shared cores, 6 cold 100K-token
    # prompts in flight, what the gateway adds to small chats' p99 (its p99 minus that of
    # the same chats sent direct): 2 processes 1.6-14 ms (median 6 over 12 runs), threads
    # 11-55 ms (median 15 over 7, more in 6 of 7 paired runs), processes at nice +10
    # 13-19 ms; ~105 MB of RSS per process
    encode_processes: Annotated[int, Field(ge=0, le=64)] | Literal["auto"] = "auto"
    # name of the environment variable with comma-separated inbound keys (unset: no auth)
    api_keys_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # /metrics without the inbound key (for a Prometheus that holds none); with no inbound
    # keys configured it is open anyway
    metrics_public: bool = False
    log_prompts: bool = False
    # JSONL of the chat request bodies received (written only when log_prompts is true)
    request_log: Path | None = None

    def processes(self, cpus: int | None = None) -> int:
        """How many encode processes the gateway runs: ``encode_processes``, with "auto" 2
        where there are at least 2 cores (``cpus``, default ``os.cpu_count()``), else 0.

        >>> GatewaySettings().processes(cpus=2), GatewaySettings().processes(cpus=1)
        (2, 0)
        >>> GatewaySettings(encode_processes=0).processes(cpus=8)
        0
        """
        if self.encode_processes != "auto":
            return self.encode_processes
        cores = (os.cpu_count() if cpus is None else cpus) or 1
        return 2 if cores >= 2 else 0

    @field_validator("upstreams", mode="before")
    @classmethod
    def _json_upstreams(cls, value: Any) -> Any:
        # from the environment or a flag the tables arrive as JSON text
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise ValueError('must be JSON: {"NAME": {"base_url": "..."}}') from None
        return value


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
    gateway: GatewaySettings = GatewaySettings()


SECTIONS: dict[str, type[_Section]] = {
    "api": ApiSettings,
    "model": ModelSettings,
    "debug": DebugSettings,
    "observability": ObservabilitySettings,
    "tokenizer": TokenizerSettings,
    "gateway": GatewaySettings,
}

# alias (dotted) -> canonical (dotted)
ALIASES: dict[str, str] = {"api.timeout": "api.timeout_seconds", "model.name": "model.default"}

KEYS: list[str] = [f"{s}.{f}" for s, m in SECTIONS.items() for f in m.model_fields]
ALL_NAMES: set[str] = set(KEYS) | set(ALIASES)

SECRET_KEYS: frozenset[str] = frozenset({"api.api_key"})
# Values shown only through redact_url: a user may paste credentials into them.
URL_KEYS: frozenset[str] = frozenset(
    {"api.base_url", "api.metrics_url", "observability.otlp_endpoint"}
)

# What a value must look like, in words a user can act on.
EXPECTED: dict[str, str] = {
    "api.base_url": 'a URL string like "http://host:8000/v1"',
    "api.api_key": "a string",
    "api.timeout_seconds": "a number of seconds above 0 and at most 86400, e.g. 600",
    "api.max_retries": "a whole number from 0 to 100, e.g. 2",
    "api.metrics_url": 'a URL string like "http://host:8000/metrics"',
    "api.metrics_auth": "true or false",
    "model.default": 'a model name string, e.g. "Qwen/Qwen2.5-0.5B-Instruct"',
    "model.temperature": "a number from 0 to 100, e.g. 0.0",
    "model.max_tokens": "a whole number from 1 to 1000000, e.g. 16",
    "debug.log_request_timing": "true or false",
    "debug.log_token_count": "true or false",
    "observability.record_ttft": "true or false",
    "observability.record_tokenize_ms": "true or false",
    "observability.record_queue_ms": "true or false",
    "observability.records_dir": 'a directory path string, e.g. "ttftscope-records"',
    "observability.log_requests": "true or false",
    "observability.otlp_endpoint": 'an OTLP/HTTP URL string, e.g. "http://127.0.0.1:4318"',
    "observability.trace_receiver_port": "a port number from 1 to 65535, or 0 for none, e.g. 14318",
    "observability.read_traces": '"auto", "on" or "off"',
    "tokenizer.path": "a path string",
    "gateway.host": 'an address to listen on, e.g. "127.0.0.1"',
    "gateway.port": "a port number from 1 to 65535, e.g. 8100",
    "gateway.cache_mb": "a whole number of megabytes from 1, e.g. 512",
    "gateway.upstreams": 'tables [gateway.upstreams.NAME] with base_url = "http://host:8000/v1"',
    "gateway.verify_every": "a whole number >= 0 (0: never), e.g. 100",
    "gateway.verify_first": "a whole number >= 0 (0: none), e.g. 3",
    "gateway.version_poll_seconds": "seconds >= 0 (0: off), e.g. 60",
    "gateway.shadow_every": "a whole number >= 0 (0: never), e.g. 1000",
    "gateway.max_body_mb": "a number of megabytes above 0, e.g. 64",
    "gateway.max_header_kb": "a whole number of kilobytes from 1, e.g. 64",
    "gateway.max_headers": "a whole number of headers from 1, e.g. 100",
    "gateway.header_timeout_s": "a number of seconds above 0 and at most 3600, e.g. 15",
    "gateway.body_timeout_s": "a number of seconds above 0 and at most 3600, e.g. 60",
    "gateway.idle_timeout_s": "a number of seconds above 0 and at most 3600, e.g. 15",
    "gateway.request_timeout_s": "a number of seconds above 0 and at most 86400, e.g. 3600",
    "gateway.max_answer_mb": "a number of megabytes above 0, e.g. 128",
    "gateway.max_messages": "a whole number of messages from 1, e.g. 20000",
    "gateway.encode_workers": "a whole number of threads from 1 to 64, e.g. 2",
    "gateway.encode_queue": "a whole number >= 0 of waiting encodes, e.g. 16",
    "gateway.encode_processes": (
        'a whole number of processes from 0 (threads only) to 64, or "auto" (2 on 2+ cores)'
    ),
    "gateway.api_keys_env": 'the name of an environment variable, e.g. "GATEWAY_KEYS"',
    "gateway.metrics_public": "true or false",
    "gateway.log_prompts": "true or false",
    "gateway.request_log": 'a file path string, e.g. "gateway-requests.jsonl"',
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
