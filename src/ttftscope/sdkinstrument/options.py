"""What ``instrument`` reads from the settings and the client: the worker's options.

Also whether vLLM's spans are read: as for probe and bench
(:func:`ttftscope.localstate.trace_port_for`); then this instrumentation holds the shared
trace receiver (:mod:`.spanjoin`). A receiver that cannot start (its port taken) is a logged
warning and a note on every record, never an error: the server parts then come from the
``/metrics`` histograms as without traces.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ttftscope.config.schema import Settings, derive_metrics_url, same_origin
from ttftscope.errors import TtftscopeError
from ttftscope.localstate import trace_port_for
from ttftscope.sdkinstrument.record import RUN_PREFIX
from ttftscope.sdkinstrument.spanjoin import acquire
from ttftscope.sdkinstrument.worker import WorkerOptions
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tracing.context import REQUEST_ID, TRACEPARENT
from ttftscope.tracing.emit import SpanEmitter, open_emitter

if TYPE_CHECKING:
    from ttftscope.tracing.receiver import TraceReceiver

__all__ = ["settings_or_default", "trace_headers", "with_spans", "worker_options"]

log = logging.getLogger("ttftscope.instrument")


def trace_headers(client: Any) -> dict[str, str]:
    """The trace headers a client sends on every call (``default_headers``): they win."""
    custom = getattr(client, "_custom_headers", None)
    names = {TRACEPARENT, REQUEST_ID.lower()}
    if not isinstance(custom, Mapping):
        return {}
    return {k: v for k, v in custom.items() if k.lower() in names and isinstance(v, str)}


def _emitter(settings: Settings) -> SpanEmitter | None:
    try:
        return open_emitter(settings.observability.otlp_endpoint, command="instrument")
    except TtftscopeError as exc:  # observability must not stop an application
        log.warning("ttftscope.instrument: no client spans: %s", exc)
        return None


def settings_or_default(settings: Settings | None) -> Settings:
    """``settings``, else the loaded ones, else (a broken configuration, logged) the defaults."""
    if settings is not None:
        return settings
    from ttftscope.config.loader import load_settings

    try:
        return load_settings().settings
    except TtftscopeError as exc:
        log.warning("ttftscope.instrument: using default settings: %s", exc)
        return Settings()


def _records_path(records: str | Path | None, settings: Settings) -> Path | None:
    target = Path(records) if records is not None else settings.observability.records_dir
    if target is None:
        return None
    target = target.expanduser()
    return target if target.suffix == ".jsonl" else target / "instrument.jsonl"


def worker_options(
    client: Any, settings: Settings, records: str | Path | None, tok: Tokenizer | str | Path | None
) -> tuple[WorkerOptions, bool]:
    """What the worker does for ``client`` (spans: :func:`with_spans`); whether calls' bodies
    are kept."""
    obs, api = settings.observability, settings.api
    base_url = str(client.base_url)
    explicit = api.metrics_url != derive_metrics_url(api.base_url)
    metrics_url = api.metrics_url if explicit else derive_metrics_url(base_url)
    key = client.api_key if isinstance(client.api_key, str) else ""
    send_key = key and (api.metrics_auth or same_origin(base_url, metrics_url))
    path = _records_path(records, settings)
    tokenizer = tok if tok is not None else settings.tokenizer.path
    secrets = [key, api.api_key.get_secret_value() if api.api_key else ""]
    opts = WorkerOptions(
        run_id=f"{RUN_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}",
        base_url=base_url,
        record_ttft=obs.record_ttft,
        record_tokenize=obs.record_tokenize_ms and tokenizer is not None,
        record_queue=obs.record_queue_ms,
        log_tokens=settings.debug.log_token_count,
        log_timing=settings.debug.log_request_timing,
        metrics_url=metrics_url,
        metrics_headers={"Authorization": f"Bearer {key}"} if send_key else {},
        records_path=path,
        requests_path=path.parent / "requests.jsonl" if path and obs.log_requests else None,
        tokenizer=tokenizer,
        secrets=tuple(s for s in secrets if s),
        emitter=_emitter(settings),
    )
    return opts, opts.record_tokenize or opts.requests_path is not None


def with_spans(
    opts: WorkerOptions, settings: Settings
) -> tuple[WorkerOptions, TraceReceiver | None]:
    """``opts`` reading vLLM's spans when they are read, and the receiver this instrumentation
    holds then (release it on close).

    >>> opts = WorkerOptions(run_id="r", base_url="http://h/v1")
    >>> off = Settings.model_validate({"observability": {"read_traces": "off"}})
    >>> with_spans(opts, off) == (opts, None)
    True
    """
    if not settings.observability.record_queue_ms:
        return opts, None
    receiver, note = _receiver(settings, opts.base_url)
    spans = None if receiver is None else receiver.store
    return dataclasses.replace(opts, spans=spans, trace_note=note), receiver


def _receiver(settings: Settings, base_url: str) -> tuple[TraceReceiver | None, str | None]:
    """The receiver of vLLM's spans when they are read (as probe and bench decide), or why not."""
    port = trace_port_for(settings, base_url)
    if port is None:
        return None, None
    try:
        return acquire(port), None
    except Exception as exc:  # observability must not stop an application
        log.warning(
            "ttftscope.instrument: vLLM's spans are not read, server parts come from /metrics "
            "histograms (exact one call at a time only): %s",
            exc,
        )
        return None, (
            f"vLLM's spans not read (no trace receiver on 127.0.0.1:{port}: "
            f"{type(exc).__name__}): server parts from /metrics histograms"
        )
