"""ttftscope: where time to first token goes on vLLM / OpenAI-compatible servers.

Every supported name is importable from here, and only from here (``__all__``); the
subpackages are the implementation. Heavy modules load on first use, so ``import ttftscope``
and the CLI's start stay fast.

>>> import ttftscope; ttftscope.__version__
'0.1.0'
>>> from ttftscope import load_settings, Endpoint
>>> Endpoint.from_settings(load_settings(env={}).settings).base_url
'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING

from ttftscope.errors import (
    AuthError,
    BadResponse,
    ConfigError,
    FailureKind,
    LocalServerError,
    MetricsError,
    ModelNotFound,
    RateLimited,
    RequestTimeout,
    ServerError,
    ServerRequestError,
    ServerStatusError,
    ServerUnreachable,
    StreamBroken,
    TokenizerError,
    TransportFailure,
    TtftscopeError,
)

if TYPE_CHECKING:
    from ttftscope.bench.options import BenchOptions
    from ttftscope.bench.runner import BenchRun, run_bench
    from ttftscope.client.endpoint import Endpoint
    from ttftscope.client.ping import PingResult, list_models, ping
    from ttftscope.client.stream import PhaseTimes, StreamResult, encode_body, stream_completion
    from ttftscope.config.loader import LoadedSettings, load_settings
    from ttftscope.config.redact import redact, redact_text
    from ttftscope.config.schema import Settings
    from ttftscope.doctor.prefix import PrefixDiff, diff_prompts
    from ttftscope.metrics.engines import ServerBreakdown, breakdown, queue_depth
    from ttftscope.metrics.prom import MetricsDelta, MetricsSnapshot, delta, parse
    from ttftscope.metrics.scrape import ascrape, scrape
    from ttftscope.probe.experiments import ProbeOptions, ProbeRun, run_probe
    from ttftscope.probe.summary import summarize
    from ttftscope.records import (
        RecordsRead,
        RecordWriter,
        RequestRecord,
        read_records,
        read_records_report,
    )
    from ttftscope.results.summaries import BenchSummary
    from ttftscope.sdkinstrument.wrap import Instrumentation, instrument, instrumentation
    from ttftscope.tokenization.chat import ChatRenderer, ChatSession
    from ttftscope.tokenization.incremental import EncoderStats, IncrementalEncoder
    from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

__version__ = "0.1.0"

# public name -> the module that defines it (loaded on first attribute access)
_LAZY: dict[str, str] = {
    "BenchOptions": "bench.options",
    "BenchRun": "bench.runner",
    "BenchSummary": "results.summaries",
    "run_bench": "bench.runner",
    "Endpoint": "client.endpoint",
    "PingResult": "client.ping",
    "list_models": "client.ping",
    "ping": "client.ping",
    "PhaseTimes": "client.stream",
    "StreamResult": "client.stream",
    "encode_body": "client.stream",
    "stream_completion": "client.stream",
    "LoadedSettings": "config.loader",
    "load_settings": "config.loader",
    "redact": "config.redact",
    "redact_text": "config.redact",
    "Settings": "config.schema",
    "Instrumentation": "sdkinstrument.wrap",
    "instrument": "sdkinstrument.wrap",
    "instrumentation": "sdkinstrument.wrap",
    "PrefixDiff": "doctor.prefix",
    "diff_prompts": "doctor.prefix",
    "ServerBreakdown": "metrics.engines",
    "breakdown": "metrics.engines",
    "queue_depth": "metrics.engines",
    "MetricsDelta": "metrics.prom",
    "MetricsSnapshot": "metrics.prom",
    "ascrape": "metrics.scrape",
    "delta": "metrics.prom",
    "parse": "metrics.prom",
    "scrape": "metrics.scrape",
    "ProbeOptions": "probe.experiments",
    "ProbeRun": "probe.experiments",
    "run_probe": "probe.experiments",
    "summarize": "probe.summary",
    "RequestRecord": "records",
    "RecordWriter": "records",
    "read_records": "records",
    "read_records_report": "records",
    "RecordsRead": "records",
    "ChatRenderer": "tokenization.chat",
    "ChatSession": "tokenization.chat",
    "EncoderStats": "tokenization.incremental",
    "IncrementalEncoder": "tokenization.incremental",
    "Tokenizer": "tokenization.loader",
    "load_tokenizer": "tokenization.loader",
}

# old public name -> (new name, module that defines it): kept for one release, warn on use
_DEPRECATED: dict[str, tuple[str, str]] = {
    "ProbeRecord": ("RequestRecord", "records"),
}

if TYPE_CHECKING:  # the deprecated names stay typed for callers while they last
    ProbeRecord = RequestRecord

__all__ = [
    "AuthError",
    "BadResponse",
    "BenchOptions",
    "BenchRun",
    "BenchSummary",
    "ChatRenderer",
    "ChatSession",
    "ConfigError",
    "EncoderStats",
    "Endpoint",
    "FailureKind",
    "IncrementalEncoder",
    "Instrumentation",
    "LoadedSettings",
    "LocalServerError",
    "MetricsDelta",
    "MetricsError",
    "MetricsSnapshot",
    "ModelNotFound",
    "PhaseTimes",
    "PingResult",
    "PrefixDiff",
    "ProbeOptions",
    "ProbeRun",
    "RateLimited",
    "RecordWriter",
    "RecordsRead",
    "RequestRecord",
    "RequestTimeout",
    "ServerBreakdown",
    "ServerError",
    "ServerRequestError",
    "ServerStatusError",
    "ServerUnreachable",
    "Settings",
    "StreamBroken",
    "StreamResult",
    "Tokenizer",
    "TokenizerError",
    "TransportFailure",
    "TtftscopeError",
    "__version__",
    "ascrape",
    "breakdown",
    "delta",
    "diff_prompts",
    "encode_body",
    "instrument",
    "instrumentation",
    "list_models",
    "load_settings",
    "load_tokenizer",
    "parse",
    "ping",
    "queue_depth",
    "read_records",
    "read_records_report",
    "redact",
    "redact_text",
    "run_bench",
    "run_probe",
    "scrape",
    "stream_completion",
    "summarize",
]


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        new, _module = _DEPRECATED[name]
        warnings.warn(
            f"ttftscope.{name} is deprecated and will be removed in the next release; "
            f"use ttftscope.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__(new)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ttftscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ttftscope.{module}"), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
