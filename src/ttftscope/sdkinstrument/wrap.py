"""``instrument(client)``: per-call records from the official ``openai`` SDK, off the hot path.

``instrument`` wraps ``client.chat.completions.create`` and ``client.completions.create`` of an
``OpenAI`` or ``AsyncOpenAI`` client in place and returns the same client. Each call, streaming
or not, becomes one :class:`~ttftscope.records.RequestRecord` (``run_id`` ``instrument-…``,
``phase`` ``"warm"``, ``notes`` starting with ``"instrument"``), the schema ``doctor`` and
``report`` read. What is recorded follows the settings: ``observability.record_ttft`` (TTFT and
total), ``record_tokenize_ms`` (client tokenization, when a tokenizer is configured),
``record_queue_ms`` (server queue, prefill and TTFT from ``/metrics`` deltas) and
``debug.log_token_count`` (prompt and completion tokens). Records go to
``observability.records_dir``/``instrument.jsonl`` (or ``records=``) and are always kept in
memory too, the last 10,000 of them, on :func:`instrumentation` (client).``records``; with
``observability.log_requests`` each request body as sent (never headers or keys) also goes to
``requests.jsonl`` beside them, one ``{"run_id", "index", "t_wall", "endpoint", "body"}``
object a line (``doctor.logged_bodies`` reads it). Each call carries ``traceparent`` and
``X-Request-Id`` of a new trace (the record's ``trace_id``) unless the call's
``extra_headers`` or the client's ``default_headers`` set them (then theirs go out and are
recorded); with ``observability.otlp_endpoint`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``) each
call also becomes a client span, built on the background thread.

Server fields come from the ``/metrics`` delta between the scrape after the previous call and
the one after this call, filled only when it is this call's alone: calls that overlapped get
the note ``"concurrent: queue not attributable"``; when the next call had already started at
the scrape, only queue and prefill (which vLLM records as a request finishes) are kept; other
traffic on the server leaves them empty with a note. Sequential calls with any gap between
them (the worker scrapes within ~20 ms of a call's end) get the full view. When vLLM's spans
are read (``observability.read_traces``: ``"on"``, or ``"auto"`` against the local server
``local-server start`` started traced; as for probe and bench), the instrumentation also runs
the trace receiver on ``observability.trace_receiver_port`` until :meth:`~Instrumentation.close`,
and each record, overlapping or not, takes queue, prefill and server TTFT from vLLM's span of
its trace (``part_sources`` ``"span"``; waited for up to 3 s after the call, off the call),
checked against the histogram figures when it had them. A port already in use is a logged
warning and a note on the records: the histograms then serve as without traces.

Guarantees: the SDK returns exactly what it returns without us (streams are the SDK's own
objects, timed in place); our code never raises into the call (the SDK's own exceptions, a
429's ``RateLimitError`` included, reach the caller unchanged); and the call pays for a few
timestamps only: records, ``/metrics`` scrapes and tokenization run on one background thread
behind a bounded queue (when full, calls go unrecorded and are counted in ``stats.dropped``).
Records are flushed at interpreter exit.

Not wrapped: ``with_raw_response`` / ``with_streaming_response`` (their calls pass through
unrecorded), ``chat.completions.parse`` / ``.stream``, the Responses API, and clients made
later with ``client.with_options(...)`` / ``copy()`` (instrument those too).
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ttftscope.config.schema import Settings
from ttftscope.errors import TtftscopeError
from ttftscope.records import RequestRecord
from ttftscope.sdkinstrument.calls import (
    Call,
    CallTracker,
    Endpoint,
    body_snapshot,
    call_variant,
    patch_stream,
)
from ttftscope.sdkinstrument.options import (
    settings_or_default,
    trace_headers,
    with_spans,
    worker_options,
)
from ttftscope.sdkinstrument.spanjoin import release
from ttftscope.sdkinstrument.worker import Worker, WorkerOptions, WorkerStats
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tracing.context import TraceContext, request_id_in, with_trace

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

    from ttftscope.tracing.receiver import TraceReceiver

__all__ = ["Instrumentation", "instrument", "instrumentation"]

log = logging.getLogger("ttftscope.instrument")
C = TypeVar("C", "OpenAI", "AsyncOpenAI")

_HANDLES: weakref.WeakKeyDictionary[object, Instrumentation] = weakref.WeakKeyDictionary()
_LIVE: weakref.WeakSet[Instrumentation] = weakref.WeakSet()
_EXIT_S = 5.0
_RING = 64


class Instrumentation:
    """The records and controls of one instrumented client (see :func:`instrumentation`).

    >>> from openai import OpenAI
    >>> client = instrument(OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
    ...                     settings=Settings())
    >>> handle = instrumentation(client)
    >>> handle.records, handle.stats.dropped, handle.close()
    ([], 0, True)
    """

    def __init__(
        self,
        opts: WorkerOptions,
        *,
        snapshot_bodies: bool,
        receiver: TraceReceiver | None = None,
    ) -> None:
        self.run_id = opts.run_id
        self.path = opts.records_path
        self._bodies = snapshot_bodies
        self._lock = threading.Lock()
        self._started = 0
        self._in_flight = 0
        self._starts = [0] * _RING  # start stamps of the latest calls, by index % _RING
        self._worker = Worker(opts, self._next_start)
        self._restore: list[Callable[[], None]] = []
        self._receiver = receiver  # vLLM's spans arrive there (shared, released on close)
        # trace headers the client sets on every call (they win over ours)
        self._client_trace: dict[str, str] = {}

    @property
    def records(self) -> list[RequestRecord]:
        """The latest records (at most 10,000), oldest first; :meth:`flush` first."""
        return list(self._worker.records)

    @property
    def stats(self) -> WorkerStats:
        """Calls seen, recorded, dropped (queue full) and internal errors."""
        return self._worker.stats

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every finished call is recorded and written; False on timeout."""
        return self._worker.flush(timeout)

    def close(self, timeout: float = 10.0) -> bool:
        """Flush, unwrap the client (later calls go unrecorded) and close the files.

        Records still waiting for vLLM's spans wait at most ``timeout`` in all; then they take
        what has arrived. The records stay readable here; the client can be instrumented again.
        """
        for restore in self._restore:
            restore()
        self._restore.clear()
        _LIVE.discard(self)
        for client, handle in list(_HANDLES.items()):
            if handle is self:
                del _HANDLES[client]
        done = self._worker.close(timeout)
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            release(receiver)
        return done

    # -- inside the user's call: timestamps and counters only --------------------------
    def _begin(self, endpoint: Endpoint, kwargs: dict[str, Any]) -> Call | None:
        try:
            model = kwargs.get("model")
            body = body_snapshot(kwargs) if self._bodies else None
            with self._lock:
                index = self._started
                self._started += 1
                busy = self._in_flight > 0
                self._in_flight += 1
                start = self._starts[index % _RING] = time.monotonic_ns()
            trace_id, request_id, trace = self._trace(kwargs)
            return Call(
                index=index,
                endpoint=endpoint,
                variant=call_variant(endpoint, kwargs),
                model=model if isinstance(model, str) else None,
                stream=kwargs.get("stream") is True,
                t_wall=time.time(),
                start_ns=start,
                busy_at_start=busy,
                body=body,
                trace_id=trace_id,
                request_id=request_id,
                trace=trace,
            )
        except Exception as exc:
            _internal("start", exc)
            return None

    def _trace(self, kwargs: dict[str, Any]) -> tuple[str | None, str | None, TraceContext | None]:
        """Add ``traceparent`` and ``X-Request-Id`` to the call's ``extra_headers`` unless the
        call or the client sets them; the trace id and request id sent, and the context when
        it is ours."""
        extra = kwargs.get("extra_headers")
        extra = dict(extra) if isinstance(extra, Mapping) else {}
        # a header named with a non-string value (the SDK's Omit) is the caller's choice too
        named = {k: v if isinstance(v, str) else "" for k, v in extra.items()}
        _sent, ctx, ours = with_trace({**self._client_trace, **named})
        added = {k: v for k, v in _sent.items() if k not in named and k not in self._client_trace}
        if added:
            kwargs["extra_headers"] = {**extra, **added}
        trace_id = None if ctx is None else ctx.trace_id
        return trace_id, request_id_in(_sent), (ctx if ours else None)

    def _returned(self, call: Call | None, result: Any, *, is_async: bool) -> None:
        if call is None:
            return
        try:
            call.returned_ns = time.monotonic_ns()
            tracker = CallTracker(call, self._finish)
            if call.stream and patch_stream(result, tracker, is_async=is_async):
                return
            if not call.stream and hasattr(result, "choices"):
                call.usage = getattr(result, "usage", None)
                call.response_model = getattr(result, "model", None)
                tracker.end()
                return
            call.done = True  # a raw response wrapper: passed through, not recorded
            self._settle(call)
        except Exception as exc:
            _internal("return", exc)
            if not call.done:  # keep the in-flight count right, or every call looks concurrent
                call.done = True
                self._settle(call)

    def _failed(self, call: Call | None, exc: BaseException) -> None:
        if call is not None:
            CallTracker(call, self._finish).end(exc)

    def _next_start(self, index: int) -> int | None:
        """When the call after ``index`` started (0: long ago), or None if none has."""
        with self._lock:
            if self._started <= index + 1:
                return None
            if self._started - (index + 1) >= _RING:
                return 0
            return self._starts[(index + 1) % _RING]

    def _settle(self, call: Call) -> bool:
        with self._lock:
            self._in_flight -= 1
            return call.busy_at_start or self._started != call.index + 1

    def _finish(self, call: Call) -> None:
        call.overlapped = self._settle(call)
        self._worker.submit(call)


_warned: set[str] = set()


def _internal(where: str, exc: BaseException) -> None:
    if where in _warned:
        return
    _warned.add(where)
    log.warning(
        "ttftscope.instrument: internal error at call %s (%s); the call is unaffected",
        where,
        type(exc).__name__,
    )


def _wrap(handle: Instrumentation, orig: Callable[..., Any], endpoint: Endpoint) -> Any:
    @functools.wraps(orig)
    def create(*args: Any, **kwargs: Any) -> Any:
        call = handle._begin(endpoint, kwargs)
        try:
            result = orig(*args, **kwargs)
        except BaseException as exc:
            handle._failed(call, exc)
            raise
        handle._returned(call, result, is_async=False)
        return result

    return create


def _wrap_async(handle: Instrumentation, orig: Callable[..., Any], endpoint: Endpoint) -> Any:
    @functools.wraps(orig)
    async def create(*args: Any, **kwargs: Any) -> Any:
        call = handle._begin(endpoint, kwargs)
        try:
            result = await orig(*args, **kwargs)
        except BaseException as exc:
            handle._failed(call, exc)
            raise
        handle._returned(call, result, is_async=True)
        return result

    return create


def instrument(
    client: C,
    *,
    settings: Settings | None = None,
    records: str | Path | None = None,
    tokenizer: Tokenizer | str | Path | None = None,
) -> C:
    """Record every chat and completions call of an ``openai`` client; returns ``client``.

    ``settings`` default to :func:`~ttftscope.config.load_settings` (a broken configuration
    is logged and the defaults used: observability must not stop an application).
    ``records`` is a directory (records go to ``instrument.jsonl`` in it) or a ``.jsonl``
    file; default ``observability.records_dir``, else memory only. ``tokenizer`` (default
    ``tokenizer.path``) turns on client tokenization timing. ``/metrics`` is the one next to
    the client's ``base_url`` unless ``api.metrics_url`` is set. Instrumenting a client twice
    changes nothing. :func:`instrumentation` gives the records and ``flush``/``close``.

    >>> from openai import OpenAI
    >>> client = instrument(OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
    ...                     settings=Settings())
    >>> instrumentation(client).run_id.startswith("instrument-")
    True
    >>> instrumentation(client).close()
    True
    """
    if client in _HANDLES:
        return client
    handle = _handle(client, settings_or_default(settings), records, tokenizer)
    wrap = _wrap_async if _is_async_client(client) else _wrap
    pairs: tuple[tuple[Any, Endpoint], ...] = (
        (client.chat.completions, "chat"),
        (client.completions, "completions"),
    )
    for resource, endpoint in pairs:
        orig = resource.create
        resource.create = wrap(handle, orig, endpoint)
        handle._restore.append(functools.partial(_unwrap, resource))
    _HANDLES[client] = handle
    _LIVE.add(handle)
    return client


def _handle(
    client: Any, settings: Settings, records: str | Path | None, tok: Tokenizer | str | Path | None
) -> Instrumentation:
    opts, bodies = worker_options(client, settings, records, tok)
    opts, receiver = with_spans(opts, settings)
    handle = Instrumentation(opts, snapshot_bodies=bodies, receiver=receiver)
    handle._client_trace = trace_headers(client)
    return handle


def instrumentation(client: object) -> Instrumentation:
    """The :class:`Instrumentation` of a client :func:`instrument` wrapped.

    >>> instrumentation(object())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ttftscope.TtftscopeError: this client is not instrumented...
    """
    try:
        handle = _HANDLES.get(client)
    except TypeError:  # not weak-referenceable: no SDK client
        handle = None
    if handle is None:
        raise TtftscopeError(
            "this client is not instrumented (or its instrumentation was closed)",
            hint="call ttftscope.instrument(client) first, on this very client object",
        )
    return handle


def _unwrap(resource: Any) -> None:
    vars(resource).pop("create", None)


def _is_async_client(client: object) -> bool:
    import openai

    return isinstance(client, openai.AsyncOpenAI)


@atexit.register
def _close_all() -> None:
    deadline = time.monotonic() + _EXIT_S
    for handle in list(_LIVE):
        handle.close(timeout=max(0.1, deadline - time.monotonic()))
