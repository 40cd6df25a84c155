"""The background side of ``instrument``: one daemon thread builds, enriches and writes records.

The user's call only puts a finished :class:`~.calls.Call` on a queue. Here, in
order of the calls' ends: the client record is built; the ``/metrics`` window around the call
(:mod:`.sources`) fills the server fields when it is attributable — the call
overlapped no other call and every histogram advanced by exactly one observation (only queue
and prefill when the next call had already started); client tokenization is timed when a
tokenizer is configured; when vLLM's spans are read, the record waits for its span on the
thread of :mod:`.spanjoin` (in order, so this one's scrapes still follow each call's end); and
the record is kept in memory and written. Nothing here raises
out of the thread: a failing step is counted in ``stats.errors`` and logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ttftscope.errors import TtftscopeError
from ttftscope.metrics.prom import MetricsSnapshot
from ttftscope.records import RecordWriter, RequestRecord
from ttftscope.sdkinstrument.calls import Call
from ttftscope.sdkinstrument.record import (
    NOT_ATTRIBUTABLE,
    add_finish_view,
    add_server_view,
    attributable,
    client_record,
)
from ttftscope.sdkinstrument.sources import ClientTokens, MetricsWindows, plain
from ttftscope.sdkinstrument.spanjoin import SpanJoin
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tracing.emit import SpanEmitter
from ttftscope.tracing.names import CLIENT_SERVICE
from ttftscope.tracing.spans import client_span
from ttftscope.tracing.store import SpanStore

log = logging.getLogger("ttftscope.instrument")

# The worker wakes on a tick while calls keep coming, not per call: waking another thread for
# every call costs the caller a GIL hand-off (milliseconds on a loaded machine). After
# _IDLE_S without calls it sleeps until the next one. The tick is short only while /metrics
# answer: each scrape should follow its call's end closely.
_TICK_S = 0.02
_SLOW_TICK_S = 0.1
_IDLE_S = 1.0
_FINISH_S = 5.0  # at close, the span thread's last records: no more waiting, just delivering


@dataclass(frozen=True)
class WorkerOptions:
    """What the worker records and where; built from the settings by ``instrument``."""

    run_id: str
    base_url: str
    record_ttft: bool = True
    record_tokenize: bool = True
    record_queue: bool = True
    log_tokens: bool = False
    log_timing: bool = False
    metrics_url: str | None = None
    metrics_headers: Mapping[str, str] = field(default_factory=dict)
    records_path: Path | None = None
    requests_path: Path | None = None
    tokenizer: Tokenizer | str | Path | None = None
    settle_s: float = 2.0
    scrape_timeout_s: float = 2.0
    keep: int = 10_000
    secrets: tuple[str, ...] = ()
    emitter: SpanEmitter | None = None  # client spans, when tracing is on
    spans: SpanStore | None = None  # vLLM's spans, when they are read (:mod:`.spanjoin`)
    span_wait_s: float = 3.0  # how long after its call's end a record waits for its span
    trace_note: str | None = None  # on every record: why spans are not read after all


_TIMING_FIELDS = (
    "client_ttft_ms",
    "wire_ttft_ms",
    "headers_ms",
    "first_event_ms",
    "last_byte_ms",
    "e2el_ms",
    "itl_mean_ms",
    "itl_max_ms",
    "tpot_ms",
    "server_ttft_ms",
    "outside_server_ms",
)


@dataclass
class WorkerStats:
    """Counters of one instrumentation (read them from ``Instrumentation.stats``).

    >>> WorkerStats().dropped
    0
    """

    calls: int = 0  # handed to the worker
    recorded: int = 0
    dropped: int = 0  # the queue was full: the call went unrecorded
    errors: int = 0  # records that failed to build or write (logged once)


class Worker:
    """The daemon thread and its bounded queue; ``submit`` never blocks."""

    def __init__(
        self,
        opts: WorkerOptions,
        next_start: Callable[[int], int | None],
        *,
        max_pending: int = 10_000,
    ) -> None:
        self.opts = opts
        self._next_start = next_start
        self.stats = WorkerStats()
        self.records: deque[RequestRecord] = deque(maxlen=opts.keep)
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._queue: deque[Call | None] = deque()
        self._processed = 0
        self._closed = False
        self._idle = True
        self._metrics = (
            MetricsWindows(
                opts.metrics_url,
                opts.metrics_headers,
                timeout_s=opts.scrape_timeout_s,
                settle_s=opts.settle_s,
            )
            if opts.record_queue and opts.metrics_url
            else None
        )
        self._tokens = ClientTokens(opts.tokenizer) if opts.record_tokenize else None
        self._writer: RecordWriter | None = None
        self._no_writer = False
        self._requests: Any = None
        self._warned: set[str] = set()
        self._join: SpanJoin[Call] | None = (
            SpanJoin(opts.spans, opts.span_wait_s, self._deliver, self._guard)
            if opts.spans is not None
            else None
        )
        self._thread = threading.Thread(target=self._run, name="ttftscope-instrument", daemon=True)
        self._thread.start()

    def submit(self, call: Call) -> None:
        with self._cond:
            if self._closed or len(self._queue) >= self._max_pending:
                self.stats.dropped += 1
                return
            self.stats.calls += 1
            self._queue.append(call)
            if self._idle:
                self._idle = False
                self._cond.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted call is recorded; False if ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self.stats.calls
            while self._processed < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return self._join is None or self._join.drain(deadline - time.monotonic())

    def close(self, timeout: float = 10.0) -> bool:
        """Flush, stop the thread and close the files; later calls go unrecorded."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._queue.append(None)
            self._cond.notify_all()
        self._thread.join(timeout=max(0.1, timeout))
        return done

    def _run(self) -> None:
        if self._metrics is not None:
            self._guard("metrics", lambda: setattr(self._metrics, "baseline", self._take()))
        while True:
            item = self._next()
            if item is None:
                break
            self._guard("record", self._process, item)
            with self._cond:
                self._processed += 1
                self._cond.notify_all()
        if self._join is not None:  # the records still waiting take what spans are there
            self._join.finish(_FINISH_S)
        self._shutdown()

    def _next(self) -> Call | None:
        with self._cond:
            waited = 0.0
            while not self._queue:
                if waited >= _IDLE_S:
                    self._idle = True
                    self._cond.wait()
                else:
                    tick = _TICK_S if self._scraping() else _SLOW_TICK_S
                    self._cond.wait(tick)
                    waited += tick
            return self._queue.popleft()

    def _scraping(self) -> bool:
        return self._metrics is not None and self._metrics.failed_at is None

    def _take(self) -> MetricsSnapshot | None:
        return self._metrics.take() if self._metrics is not None else None

    def _guard(self, what: str, fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            self.stats.errors += 1
            if what not in self._warned:
                self._warned.add(what)
                log.warning(
                    "ttftscope.instrument: %s failed (%s: %s); calls are unaffected",
                    what,
                    type(exc).__name__,
                    exc,
                )

    def _process(self, call: Call) -> None:
        opts = self.opts
        rec = client_record(
            call,
            run_id=opts.run_id,
            url=opts.base_url,
            secrets=opts.secrets,
            log_tokens=opts.log_tokens,
        )
        if self._metrics is not None:
            self._server_view(rec, call, self._metrics)
        if self._tokens is not None and call.body is not None:
            ms, count, note = self._tokens.measure(call)
            rec.tokenize_ms, rec.client_tokens = ms, count
            if note:
                rec.notes.append(note)
        if opts.trace_note is not None:
            rec.notes.append(opts.trace_note)
        if self._join is not None:
            self._join.put(rec, call)
        else:
            self._deliver(rec, call)

    def _deliver(self, rec: RequestRecord, call: Call) -> None:
        """Keep, write and log a finished record (on the span thread when spans are read)."""
        opts = self.opts
        if opts.emitter is not None and call.trace is not None:  # from the times measured
            spans = [client_span(rec, call.trace)]
            self._guard("span", opts.emitter.emit, CLIENT_SERVICE, spans)
        if not opts.record_ttft:
            for name in _TIMING_FIELDS:
                setattr(rec, name, None)
            rec.part_sources.pop("server_ttft_ms", None)  # a source of nothing recorded
        self.records.append(rec)
        self.stats.recorded += 1
        self._write(rec, call)
        if opts.log_timing or opts.log_tokens:
            log.info("%s", _log_line(rec))

    def _server_view(self, rec: RequestRecord, call: Call, metrics: MetricsWindows) -> None:
        if call.overlapped:
            rec.notes.append(NOT_ATTRIBUTABLE)
            with self._cond:
                busy = bool(self._queue)
            if busy:  # more calls to record: scrape once they are done
                metrics.baseline = None
                return
        got = metrics.window(call, call.model or rec.model)
        if isinstance(got, str):
            if got and not call.overlapped:
                rec.notes.append(got)
            return
        bd, sent = got
        later = self._next_start(call.index)
        how = attributable(bd, next_started=later is not None and later < sent)
        if how == "all":
            add_server_view(rec, bd, log_tokens=self.opts.log_tokens)
        elif how == "finish":
            add_finish_view(rec, bd)
        else:
            counts = {"ttft": bd.ttft_count, "e2e": bd.e2e_count}
            rec.contaminated = True
            rec.notes.append(
                f"server histograms counted {counts} in this call's window (other traffic, "
                f"or metrics published late): {NOT_ATTRIBUTABLE}"
            )

    def _write(self, rec: RequestRecord, call: Call) -> None:
        opts = self.opts
        if opts.records_path is not None and not self._no_writer:
            if self._writer is None:
                try:
                    self._writer = RecordWriter(opts.records_path)
                except TtftscopeError as exc:
                    self._no_writer = True
                    log.warning("ttftscope.instrument: records kept in memory only (%s)", exc)
                    return
            self._writer.write(rec)
        if opts.requests_path is not None and call.body is not None:
            if self._requests is None:
                opts.requests_path.parent.mkdir(parents=True, exist_ok=True)
                self._requests = opts.requests_path.open("ab")
            line = {
                "run_id": rec.run_id,
                "index": rec.index,
                "t_wall": rec.t_wall,
                "endpoint": call.endpoint,
                "body": call.body,
            }
            self._requests.write(orjson.dumps(line, default=_jsonable) + b"\n")
            self._requests.flush()

    def _shutdown(self) -> None:
        for fh in (self._writer, self._requests):
            if fh is not None:
                self._guard("close", fh.close)
        if self._metrics is not None:
            self._metrics.http.close()
        if self.opts.emitter is not None:
            self._guard("span export", self.opts.emitter.shutdown)


def _jsonable(value: Any) -> Any:
    dumped = plain(value)
    if dumped is not value:
        return dumped
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _log_line(rec: RequestRecord) -> str:
    line = (
        f"#{rec.index} {rec.variant} ttft={_fmt(rec.client_ttft_ms)}ms "
        f"total={_fmt(rec.e2el_ms)}ms queue={_fmt(rec.queue_ms)}ms "
        f"prompt_tokens={rec.prompt_tokens}"
    )
    return line if rec.ok else f"{line} FAILED {rec.error_kind}: {rec.error}"
