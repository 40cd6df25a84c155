"""ttftscope: where time to first token goes on vLLM / OpenAI-compatible servers.

Every supported name is importable from here, and only from here (``__all__``); the
subpackages are the implementation. Heavy modules load on first use, so ``import ttftscope``
and the CLI's start stay fast.

Names say what they act on (``parse_metrics``, ``summarize_probe``). Coroutines are named like
functions (``ping``, ``run_probe``, ``stream_completion``); one that has a blocking twin takes
an ``a`` (``scrape_metrics`` / ``ascrape_metrics``). Each public object shows itself as
``ttftscope.<name>`` (reprs, tracebacks, ``help``), and pickles under that name. There is one
import path per name: no aliases, no old names.

>>> import ttftscope; ttftscope.__version__
'0.1.0'
>>> ttftscope.parse_metrics, ttftscope.MetricsSnapshot
(<function parse_metrics at 0x...>, <class 'ttftscope.MetricsSnapshot'>)
>>> from ttftscope import load_settings, Endpoint
>>> Endpoint.from_settings(load_settings(env={}).settings).base_url
'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import importlib
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
    from ttftscope.metrics.engines import ServerBreakdown, queue_depth, server_breakdown
    from ttftscope.metrics.prom import MetricsDelta, MetricsSnapshot, metrics_delta, parse_metrics
    from ttftscope.metrics.scrape import ascrape_metrics, scrape_metrics
    from ttftscope.probe.experiments import ProbeOptions, ProbeRun, run_probe
    from ttftscope.probe.summary import summarize_probe
    from ttftscope.records import (
        RecordsRead,
        RecordWriter,
        RequestRecord,
        read_records,
        read_records_report,
    )
    from ttftscope.results.summaries import BenchSummary, BucketParts
    from ttftscope.sdkinstrument.wrap import Instrumentation, instrument, instrumentation
    from ttftscope.tokenization.chat import ChatRenderer, ChatSession
    from ttftscope.tokenization.encoder_state import EncoderState
    from ttftscope.tokenization.incremental import EncoderStats, IncrementalEncoder
    from ttftscope.tokenization.loader import Tokenizer, load_tokenizer
    from ttftscope.tracing.emit import open_emitter

__version__ = "0.1.0"

# public name -> the module that defines it (loaded on first attribute access)
_LAZY: dict[str, str] = {
    "BenchOptions": "bench.options",
    "BenchRun": "bench.runner",
    "BenchSummary": "results.summaries",
    "BucketParts": "results.summaries",
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
    "server_breakdown": "metrics.engines",
    "queue_depth": "metrics.engines",
    "MetricsDelta": "metrics.prom",
    "MetricsSnapshot": "metrics.prom",
    "ascrape_metrics": "metrics.scrape",
    "metrics_delta": "metrics.prom",
    "parse_metrics": "metrics.prom",
    "scrape_metrics": "metrics.scrape",
    "ProbeOptions": "probe.experiments",
    "ProbeRun": "probe.experiments",
    "run_probe": "probe.experiments",
    "summarize_probe": "probe.summary",
    "RequestRecord": "records",
    "RecordWriter": "records",
    "read_records": "records",
    "read_records_report": "records",
    "RecordsRead": "records",
    "ChatRenderer": "tokenization.chat",
    "ChatSession": "tokenization.chat",
    "EncoderState": "tokenization.encoder_state",
    "EncoderStats": "tokenization.incremental",
    "IncrementalEncoder": "tokenization.incremental",
    "Tokenizer": "tokenization.loader",
    "load_tokenizer": "tokenization.loader",
    "open_emitter": "tracing.emit",
}

__all__ = [
    "AuthError",
    "BadResponse",
    "BenchOptions",
    "BenchRun",
    "BenchSummary",
    "BucketParts",
    "ChatRenderer",
    "ChatSession",
    "ConfigError",
    "EncoderState",
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
    "ascrape_metrics",
    "diff_prompts",
    "encode_body",
    "instrument",
    "instrumentation",
    "list_models",
    "load_settings",
    "load_tokenizer",
    "metrics_delta",
    "open_emitter",
    "parse_metrics",
    "ping",
    "queue_depth",
    "read_records",
    "read_records_report",
    "redact",
    "redact_text",
    "run_bench",
    "run_probe",
    "scrape_metrics",
    "server_breakdown",
    "stream_completion",
    "summarize_probe",
]


def _present(value: object) -> object:
    """Show ``value`` as ``ttftscope.<name>`` in reprs, tracebacks, ``help`` and docs.

    Pickle finds a class or function by ``__module__`` and ``__qualname__``: here, through
    :func:`__getattr__`, so records and errors pickled by one process load in another.
    """
    value.__module__ = __name__
    return value


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ttftscope' has no attribute {name!r}")
    value = _present(getattr(importlib.import_module(f"ttftscope.{module}"), name))
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


for _name in __all__:  # the errors, imported eagerly above
    if _name in globals() and not _name.startswith("_"):
        _present(globals()[_name])
del _name
