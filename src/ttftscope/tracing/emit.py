"""Whether spans go out, and where: settings and the standard ``OTEL_*`` variables.

Tracing is off unless an endpoint is configured: ``[observability] otlp_endpoint`` first,
then ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is) or ``OTEL_EXPORTER_OTLP_ENDPOINT``
(``/v1/traces`` added), as the OpenTelemetry SDK reads them; ``OTEL_SDK_DISABLED=true`` turns
it off. When off, :func:`open_emitter` returns None and nothing from OpenTelemetry is imported.
Headers (``OTEL_EXPORTER_OTLP_HEADERS``, which may hold a key) are read by the exporter itself
and never shown: only the endpoint, through :func:`~ttftscope.config.redact.redact_url`.

>>> traces_endpoint(None, {})
>>> traces_endpoint("http://127.0.0.1:4318", {})
'http://127.0.0.1:4318/v1/traces'
>>> traces_endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"})
'http://c:4318/v1/traces'
>>> traces_endpoint("http://c:4318", {"OTEL_SDK_DISABLED": "true"})
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ttftscope.errors import MissingExtra
from ttftscope.tracing.spans import SpanData, SpanSource

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["TRACE_MODULES", "SpanEmitter", "open_emitter", "traces_endpoint"]

ENV_TRACES = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_BASE = "OTEL_EXPORTER_OTLP_ENDPOINT"
# the modules of the ``trace`` extra that emitting needs (cli.extras lists the same)
TRACE_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
# the SDK's batch processor and exporter instead of ours (what a proxy, say, needs)
ENV_EXPORTER = "TTFTSCOPE_OTLP_EXPORTER"
# a credential provider (a requests session from a plugin) is the SDK exporter's to use
CREDENTIAL_VARS = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
)


class SpanEmitter(Protocol):
    """Where finished spans go; :meth:`emit` never blocks on the network."""

    def emit(self, service: str, spans: Sequence[SpanData]) -> None: ...

    def emit_later(self, service: str, source: SpanSource) -> None:
        """The spans of ``source``, built when the emitter gets to them."""

    def shutdown(self) -> None:
        """Send what is queued, then stop (bounded by the exporter's timeout)."""


def traces_endpoint(otlp_endpoint: str | None, environ: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL spans go to, or None when tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if otlp_endpoint:
        return _traces_url(otlp_endpoint)
    if value := environ.get(ENV_TRACES, "").strip():
        return value
    if value := environ.get(ENV_BASE, "").strip():
        return _traces_url(value)
    return None


def open_emitter(
    otlp_endpoint: str | None,
    *,
    command: str = "with traces on",
    environ: Mapping[str, str] | None = None,
    exporter: SpanExporter | None = None,
    schedule_delay_ms: int | None = None,
) -> SpanEmitter | None:
    """An emitter batching spans to the configured endpoint; None when tracing is off.

    Spans go through :class:`~ttftscope.tracing.batchemit.BatchEmitter` (our encoder, our
    thread). The SDK's batch processor and exporter
    (:class:`~ttftscope.tracing.otlp.OtlpEmitter`) take them instead with an ``exporter``
    (tests pass an in-memory one; it turns tracing on by itself), a credential provider
    variable, or ``TTFTSCOPE_OTLP_EXPORTER=sdk`` (say, for an HTTP proxy: the SDK's exporter
    reads one from the environment, ours does not). ``schedule_delay_ms``: how long a batch
    waits (default ``OTEL_BSP_SCHEDULE_DELAY`` or 5 s); a reader that waits for the spans
    wants it short. Raises :class:`MissingExtra` when tracing is on without the ``trace``
    extra.

    >>> open_emitter(None, environ={}) is None
    True
    """
    url = traces_endpoint(otlp_endpoint, os.environ if environ is None else environ)
    if url is None and exporter is None:
        return None
    _check_extra(command)
    # headers, timeout, compression, TLS files and batch sizes: from the process environment,
    # as the SDK's exporter reads them (``environ`` is only where the endpoint comes from)
    if url is not None and exporter is None and not _wants_sdk(os.environ):
        from ttftscope.tracing.batchemit import BatchEmitter  # the SDK only when tracing is on

        return BatchEmitter.to(url, os.environ, schedule_delay_ms=schedule_delay_ms)
    from ttftscope.tracing.otlp import OtlpEmitter

    return OtlpEmitter(url, exporter=exporter, schedule_delay_ms=schedule_delay_ms)


def _check_extra(command: str) -> None:
    """Raise :class:`MissingExtra` unless the ``trace`` extra is installed."""
    missing = tuple(m for m in TRACE_MODULES if importlib.util.find_spec(m) is None)
    if missing:
        exc = MissingExtra("trace", missing, command=command)
        # MissingExtra's hint names the extra only; say why traces are on and the way out
        exc.hint = (
            "traces are on (observability.otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT is "
            "set): pip install 'ttftscope[trace]', or unset them to run without traces"
        )
        exc.args = (f"{exc.message}\n  hint: {exc.hint}",)
        raise exc


def _wants_sdk(environ: Mapping[str, str]) -> bool:
    """Whether the SDK's exporter is asked for, or needed (a credential provider plugin)."""
    chosen = environ.get(ENV_EXPORTER, "").strip().lower() == "sdk"
    return chosen or any(environ.get(v) for v in CREDENTIAL_VARS)


def _traces_url(base: str) -> str:
    base = base.strip().rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"
