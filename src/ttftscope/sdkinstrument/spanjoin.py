"""vLLM's spans for ``instrument``: the trace receiver it shares, and records joined in order.

When traces are read (:func:`ttftscope.localstate.trace_port_for`, as for probe and bench), the
instrumentations of one process share one receiver per port (:func:`acquire`, :func:`release`:
the last ``close()`` stops it). Each record then waits, on a thread of its own after the
worker built it, up to ``wait_s`` from its call's end for vLLM's ``llm_request`` span, found
by the record's trace id, and takes its queue, prefill and server TTFT
(:func:`ttftscope.tracing.join.join_waited`: ``part_sources`` "span", checked against the
``/metrics`` figures where the worker had them). Records leave in the order they came, so the
file keeps the calls' order; the worker never waits, so its ``/metrics`` scrapes still follow
each call's end closely.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from ttftscope.records import RequestRecord
from ttftscope.sdkinstrument.record import NOT_ATTRIBUTABLE
from ttftscope.tracing.join import join_waited, request_key
from ttftscope.tracing.names import VLLM_SPAN
from ttftscope.tracing.store import SpanStore

if TYPE_CHECKING:
    from ttftscope.tracing.receiver import TraceReceiver

__all__ = ["SPAN_NOTE", "SpanJoin", "acquire", "release"]

SPAN_NOTE = "concurrent: queue, prefill and server TTFT from vLLM's span"
_SLICE_S = 0.05  # a wait is cut in slices so that close() can end it
_lock = threading.Lock()
_shared: dict[int, tuple[TraceReceiver, int]] = {}


def acquire(port: int) -> TraceReceiver:
    """The running receiver on 127.0.0.1:``port``, started on first use; an error (port taken)
    when it cannot listen.

    >>> receiver = acquire(0)  # 0: a port the OS picks
    >>> receiver.endpoint.startswith("http://127.0.0.1:"), release(receiver)
    (True, None)
    """
    from ttftscope.tracing.receiver import TraceReceiver  # only with traces read

    with _lock:
        receiver, users = _shared.get(port, (None, 0))
        if receiver is None:
            receiver = TraceReceiver(port).start()
        _shared[port] = (receiver, users + 1)
        return receiver


def release(receiver: TraceReceiver) -> None:
    """One user fewer; the last one stops the receiver."""
    with _lock:
        for port, (held, users) in list(_shared.items()):
            if held is receiver:
                if users > 1:
                    _shared[port] = (held, users - 1)
                    return
                del _shared[port]
    receiver.stop()


T = TypeVar("T")  # what travels with a record to ``deliver`` (the worker's: its call)
Guard = Callable[..., None]  # guard(what, fn, *args): fn(*args), a failure counted and logged


def _unguarded(what: str, fn: Callable[..., object], *args: object) -> None:
    fn(*args)


class SpanJoin(Generic[T]):
    """A thread that joins each record with its spans, then hands it to ``deliver``, in order.

    >>> got = []
    >>> join = SpanJoin(SpanStore(), 0.0, lambda rec, tag: got.append((rec.index, tag)))
    >>> rec = RequestRecord(run_id="r", index=7, variant="chat", phase="warm", ok=False)
    >>> join.put(rec, "x"), join.drain(5.0), join.finish(5.0), got
    (None, True, None, [(7, 'x')])
    """

    def __init__(
        self,
        store: SpanStore,
        wait_s: float,
        deliver: Callable[[RequestRecord, T], None],
        guard: Guard = _unguarded,
    ) -> None:
        self.store, self.wait_s = store, wait_s
        self._deliver, self._guard = deliver, guard
        self._cond = threading.Condition()
        self._queue: deque[tuple[RequestRecord, T, float]] = deque()
        self._pending = 0
        self._hurry = False
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="ttftscope-spans", daemon=True)
        self._thread.start()

    def put(self, rec: RequestRecord, call: T) -> None:
        """Queue ``rec``: it waits for its spans until ``wait_s`` from now (never blocks)."""
        with self._cond:
            self._queue.append((rec, call, time.monotonic() + self.wait_s))
            self._pending += 1
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until every queued record is delivered; False if ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return True

    def finish(self, timeout: float) -> None:
        """Stop waiting: the records still queued take the spans already there, are
        delivered, and the thread ends (within ``timeout``)."""
        with self._cond:
            self._hurry = self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=max(0.1, timeout))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                rec, call, deadline = self._queue.popleft()
            key = request_key(rec)
            if rec.ok and key is not None:
                self._guard("span join", self._join, rec, key, deadline)
            self._guard("record", self._deliver, rec, call)
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()

    def _join(self, rec: RequestRecord, key: str, deadline: float) -> None:
        spans = self.store.spans(key)
        while not any(s.name == VLLM_SPAN for s in spans):
            left = deadline - time.monotonic()
            if left <= 0 or self._hurry:
                break
            spans = self.store.wait(key, (VLLM_SPAN,), timeout_s=min(left, _SLICE_S))
        # close() may have cut the wait short: the note says how long it was
        waited = min(self.wait_s, max(0.0, self.wait_s - (deadline - time.monotonic())))
        join_waited(rec, spans, round(waited, 1))
        if rec.part_sources.get("queue_ms") == "span" and NOT_ATTRIBUTABLE in rec.notes:
            rec.notes[rec.notes.index(NOT_ATTRIBUTABLE)] = SPAN_NOTE
