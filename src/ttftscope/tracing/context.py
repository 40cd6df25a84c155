"""W3C trace context (``traceparent``) and the request id a server joins it by.

One id joins a request's record to every span of its trace: the 32-hex trace id. It goes out
as ``traceparent`` (which vLLM started with ``--otlp-traces-endpoint`` continues) and as
``X-Request-Id`` (which vLLM builds its request id from), so a span that carries either can be
matched to the record that holds :attr:`TraceContext.trace_id`.

>>> ctx = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
>>> ctx.trace_id, ctx.span_id, ctx.sampled
('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', True)
>>> ctx.traceparent
'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
>>> len(new_context().headers()["traceparent"])
55
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ttftscope.errors import ConfigError

TRACEPARENT = "traceparent"
REQUEST_ID = "X-Request-Id"
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class TraceContext:
    """A trace id, the id of the span that is the parent of what comes next, and the flag."""

    trace_id: str
    span_id: str
    sampled: bool = True

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    @property
    def request_id(self) -> str:
        """What goes out as ``X-Request-Id``: the trace id, so one id joins everything."""
        return self.trace_id

    def child(self) -> TraceContext:
        """The same trace with a new span id: the context a hop passes on."""
        return TraceContext(self.trace_id, _span_id(), self.sampled)

    def headers(self) -> dict[str, str]:
        """``traceparent`` and ``X-Request-Id`` for a request sent in this context."""
        return {TRACEPARENT: self.traceparent, REQUEST_ID: self.request_id}


def new_context() -> TraceContext:
    """A new trace: random ids as W3C asks (never all zeros), sampled."""
    return TraceContext(_nonzero_hex(16), _span_id())


def with_trace(
    headers: Mapping[str, str] | None,
) -> tuple[dict[str, str], TraceContext | None, bool]:
    """``headers`` plus ``traceparent`` and ``X-Request-Id`` of a new trace, unless set already.

    Returns the headers to send, the context they carry (None when the caller's own
    ``traceparent`` is not a W3C one) and whether that context is ours, i.e. a span may be
    emitted with its span id. A header the caller set (any case) is kept as it is. Under the
    caller's own ``traceparent`` (which many requests may share) the ``X-Request-Id`` is a
    fresh id of its own, so vLLM's span of this very request can be told from its siblings.

    >>> sent, ctx, ours = with_trace({"X-Team": "infra"})
    >>> sent["traceparent"] == ctx.traceparent and sent["X-Request-Id"] == ctx.trace_id, ours
    (True, True)
    >>> sent, ctx, ours = with_trace({"TraceParent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"})
    >>> ctx.trace_id == "ab" * 16, ours, "traceparent" in sent, sent["X-Request-Id"] != ctx.trace_id
    (True, False, False, True)
    """
    if not headers:  # the common case, on every request's path: no copies
        fresh = new_context()
        return {TRACEPARENT: fresh.traceparent, REQUEST_ID: fresh.trace_id}, fresh, True
    out = dict(headers)
    given = {k.lower(): v for k, v in out.items()}
    user_tp = given.get(TRACEPARENT)
    ctx: TraceContext | None
    if user_tp is None:
        ctx = new_context()
        ours = True
    else:
        ours = False
        try:
            ctx = parse_traceparent(user_tp)
        except ConfigError:
            ctx = None
    if ctx is not None:
        if user_tp is None:
            out[TRACEPARENT] = ctx.traceparent
        if REQUEST_ID.lower() not in given:
            out[REQUEST_ID] = ctx.request_id if ours else new_context().trace_id
    return out, ctx, ours


def request_id_in(headers: Mapping[str, str]) -> str | None:
    """The ``X-Request-Id`` in ``headers`` (any case), or None.

    >>> request_id_in({"x-request-id": "r1"}), request_id_in({})
    ('r1', None)
    """
    key = REQUEST_ID.lower()
    return next((v for k, v in headers.items() if k.lower() == key), None)


def parse_traceparent(value: str) -> TraceContext:
    """Read a ``traceparent`` header (version 00) or raise :class:`ConfigError` saying why."""
    match = _TRACEPARENT.match(value.strip())
    if match is None or set(match[1]) == {"0"} or set(match[2]) == {"0"}:
        raise ConfigError(
            f"traceparent {value[:80]!r} is not a W3C trace context "
            "(00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zeros)"
        )
    return TraceContext(match[1], match[2], bool(int(match[3], 16) & 1))


def _span_id() -> str:
    return _nonzero_hex(8)


def _nonzero_hex(nbytes: int) -> str:
    # random, not secrets, as OpenTelemetry's RandomIdGenerator: W3C ids must be unique, not
    # unguessable, and os.urandom costs a system call a request (~8 us on a busy machine)
    while True:
        value = random.getrandbits(nbytes * 8)
        if value:
            return f"{value:0{nbytes * 2}x}"
