"""One request's trace through the gateway: headers passed on, stage stamps, spans at the end.

The inbound ``traceparent`` and ``X-Request-Id`` always go on to the upstream (a client's
trace reaches vLLM's span whether or not the gateway traces). With tracing on, the gateway
continues the trace (or starts one): the upstream gets a child context whose span id is the
gateway's ``upstream`` span, and the stages stamp ``perf_counter_ns`` on a small per-request
:class:`HopTrace`; its spans are written only after the answer is sent, by the emitter's
exporting thread (:meth:`HopTrace.finish` hands it a :class:`FinishedHop`, which writes them
straight as OTLP protobuf, or as ``SpanData`` for the SDK's exporter). With tracing off and no
trace headers in, there is no object at all: :data:`CURRENT` stays None.

The request's :class:`HopTrace` is found through :data:`CURRENT` (a context variable the
hot path sets for the request's task), so the stages need no extra arguments.

>>> hop = begin([(b"traceparent", b"00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01")], on=True)
>>> hop.upstream["traceparent"][:35] == "00-" + "ab" * 16, hop.upstream["X-Request-Id"][:4]
(True, 'abab')
>>> hop.stage("parse", hop.start_ns); hop.mark("first_byte")
>>> [(s.name, s.parent_id == "cd" * 8) for s in hop.spans("/v1/completions", 200)]
[('gateway', True), ('parse', False)]
>>> begin([], on=False) is None
True
"""

from __future__ import annotations

import random
import time
from contextvars import ContextVar
from dataclasses import dataclass, field

from ttftscope.errors import ConfigError
from ttftscope.tracing.context import REQUEST_ID, TRACEPARENT, TraceContext, new_context
from ttftscope.tracing.context import parse_traceparent as _parse
from ttftscope.tracing.names import GATEWAY_SPAN, GATEWAY_STAGES
from ttftscope.tracing.otlpencode import Child, family_bytes
from ttftscope.tracing.spans import AttrValue, SpanData

__all__ = ["CURRENT", "UPSTREAM", "FinishedHop", "HopTrace", "begin", "traced"]

_TP = TRACEPARENT.encode()
_RID = REQUEST_ID.lower().encode()
UPSTREAM = GATEWAY_STAGES[-1]  # the stage whose span is the parent of the upstream's


@dataclass(slots=True)
class HopTrace:
    """Trace headers for the upstream; with ``ctx`` (tracing on) the stamps of the stages."""

    upstream: dict[str, str]
    ctx: TraceContext | None = None  # the gateway span's own context
    parent_id: str | None = None  # the inbound span, None when the gateway started the trace
    upstream_id: str = ""  # span id of the upstream stage: the parent of vLLM's span
    start_ns: int = 0  # perf_counter_ns at arrival
    wall_ns: int = 0  # time_ns at arrival
    stages: dict[str, tuple[int, int]] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)
    attrs: dict[str, dict[str, AttrValue]] = field(default_factory=dict)
    opened: dict[str, int] = field(default_factory=dict)

    def stage(self, name: str, start_ns: int, attrs: dict[str, AttrValue] | None = None) -> None:
        """Stage ``name`` ran from ``start_ns`` to now (no-op unless tracing is on)."""
        if self.ctx is not None:
            self.stages[name] = (start_ns, time.perf_counter_ns())
            if attrs:
                self.attrs[name] = attrs

    def open(self, name: str) -> None:
        """Stage ``name`` starts now; :meth:`close` ends it (or the request's end does)."""
        if self.ctx is not None:
            self.opened[name] = time.perf_counter_ns()

    def close(self, name: str) -> None:
        start = self.opened.pop(name, None)
        if start is not None:
            self.stages[name] = (start, time.perf_counter_ns())

    def mark(self, name: str) -> None:
        """An event of the upstream stage happened now (the first one of its name counts)."""
        if self.ctx is not None and name not in self.marks:
            self.marks[name] = time.perf_counter_ns()

    def spans(self, route: str, status: int) -> list[SpanData]:
        """The ``gateway`` span and one child per stage that ran, as plain data."""
        return self.finish(route, status).spans()

    def finish(self, route: str, status: int) -> FinishedHop:
        """The request ends now: what writes its spans (its stamps are final, so any thread
        may, later: the gateway's event loop only stamps)."""
        assert self.ctx is not None, "spans are built only when tracing is on"
        end = time.perf_counter_ns()
        if self.opened:
            for name in list(self.opened):
                self.close(name)
        # a copy: a pool thread of a request cancelled mid-stage may still stamp its stage
        return FinishedHop(self, route, status, end, dict(self.stages))


@dataclass(slots=True)
class FinishedHop:
    """A finished request's spans, written on demand (a :class:`SpanSource`): the ``gateway``
    span, then one child per stage in the order they started, ``upstream`` with its events."""

    hop: HopTrace
    route: str
    status: int
    end_ns: int  # perf_counter_ns
    stages: dict[str, tuple[int, int]]
    _children: list[Child] | None = None

    def spans(self) -> list[SpanData]:
        root = self._root()
        return [root] + [
            SpanData(
                name, root.trace_id, span_id.hex(), root.span_id, start, end,
                dict(attrs or {}), list(events), None, kind,
            )
            for name, kind, span_id, start, end, attrs, events in self._ordered()
        ]  # fmt: skip

    def span_fields(self) -> list[bytes]:
        return family_bytes(self._root(), self._ordered())

    def _root(self) -> SpanData:
        hop, status = self.hop, self.status
        assert hop.ctx is not None
        attrs: dict[str, AttrValue] = {
            "http.route": self.route,
            "http.response.status_code": status,
        }
        error = f"status {status}" if status >= 500 else None
        end = self.end_ns + hop.wall_ns - hop.start_ns
        return SpanData(
            GATEWAY_SPAN, hop.ctx.trace_id, hop.ctx.span_id, hop.parent_id, hop.wall_ns, end,
            attrs, [], error, "server",
        )  # fmt: skip

    def _ordered(self) -> list[Child]:
        """The stages as children, their ids drawn once."""
        if self._children is None:
            hop = self.hop
            shift = hop.wall_ns - hop.start_ns  # perf_counter_ns to time_ns
            out: list[Child] = []
            for name, (start, stop) in sorted(self.stages.items(), key=_started):
                attrs = hop.attrs.get(name)
                if name == UPSTREAM:
                    events = [(m, ns + shift) for m, ns in hop.marks.items()]
                    events.sort(key=_at)
                    span_id = bytes.fromhex(hop.upstream_id)
                    out.append(
                        (name, "client", span_id, start + shift, stop + shift, attrs, events)
                    )
                else:
                    out.append(
                        (name, "internal", _raw_id(), start + shift, stop + shift, attrs, ())
                    )
            self._children = out
        return self._children


def _started(stage: tuple[str, tuple[int, int]]) -> int:
    return stage[1][0]


def _at(event: tuple[str, int]) -> int:
    return event[1]


CURRENT: ContextVar[HopTrace | None] = ContextVar("ttftscope_hop_trace", default=None)


def traced() -> HopTrace | None:
    """The current request's :class:`HopTrace` when tracing is on, else None."""
    hop = CURRENT.get()
    return hop if hop is not None and hop.ctx is not None else None


def begin(headers: list[tuple[bytes, bytes]], *, on: bool) -> HopTrace | None:
    """The trace of a request with these ASGI headers; None when there is nothing to do
    (tracing off and no trace headers in)."""
    tp = rid = None
    for k, v in headers:
        if k == _TP:
            tp = v
        elif k == _RID:
            rid = v
    if not on:
        if tp is None and rid is None:
            return None
        passed: dict[str, str] = {}
        if tp is not None:
            passed[TRACEPARENT] = tp.decode("latin-1")
        if rid is not None:
            passed[REQUEST_ID] = rid.decode("latin-1")
        return HopTrace(passed)
    inbound = _inbound(tp)
    own = (
        new_context()
        if inbound is None
        else TraceContext(inbound.trace_id, _span_id(), inbound.sampled)
    )
    upstream_ctx = TraceContext(own.trace_id, _span_id(), own.sampled)
    up = {
        TRACEPARENT: upstream_ctx.traceparent,
        REQUEST_ID: own.trace_id if rid is None else rid.decode("latin-1"),
    }
    if not own.sampled:  # the caller decided not to record this trace: pass it on only
        return HopTrace(up)
    return HopTrace(
        up,
        ctx=own,
        parent_id=None if inbound is None else inbound.span_id,
        upstream_id=upstream_ctx.span_id,
        start_ns=time.perf_counter_ns(),
        wall_ns=time.time_ns(),
    )


def _span_id() -> str:
    # what the SDK's RandomIdGenerator does: random, not secrets (no system call a span)
    value = random.getrandbits(64)
    return f"{value or 1:016x}"


def _raw_id() -> bytes:
    """A span id as its 8 bytes, drawn as :func:`_span_id` draws one."""
    return (random.getrandbits(64) or 1).to_bytes(8, "big")


def _inbound(value: bytes | None) -> TraceContext | None:
    if value is None:
        return None
    try:
        return _parse(value.decode("latin-1"))
    except ConfigError:  # not a W3C context: the gateway starts its own trace
        return None
