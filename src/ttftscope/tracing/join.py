"""Join a request's record with the spans of its trace: the server's figures from vLLM's span.

vLLM's ``llm_request`` span belongs to exactly one request, under any concurrency, so its
queue, prefill and server TTFT replace the ``/metrics`` histogram deltas (exact only one
request at a time) in the record's fields, with ``part_sources`` saying ``"span"``. Where a
histogram delta was there too, the two are compared: check ``span_matches_histogram`` holds
when each figure agrees within :data:`AGREE_MS` (they are computed from the same engine
timestamps, so they should). The gateway's spans give ``gateway_ms``; every span of the trace
becomes a :class:`~ttftscope.records.SpanTiming`, in ms from the record's client start.

>>> from ttftscope.records import RequestRecord
>>> from ttftscope.tracing.otlpdecode import Span
>>> rec = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
...                     wire_ttft_ms=50.0, t_wall=1.0, trace_id="ab" * 16)
>>> vllm = Span("ab" * 16, "cd" * 8, None, "llm_request", "vllm", 1_002_000_000, 1_060_000_000,
...             {"gen_ai.latency.time_to_first_token": 0.040, "gen_ai.latency.time_in_queue": 0.001,
...              "gen_ai.latency.time_in_model_prefill": 0.030})
>>> rec = apply_spans(rec, [vllm])
>>> rec.server_ttft_ms, rec.outside_server_ms, rec.part_sources["queue_ms"]
(40.0, 10.0, 'span')
>>> [(s.service, s.name, s.start_ms, s.end_ms) for s in rec.spans]
[('server', 'llm_request', 2.0, 60.0)]
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ttftscope.records import RequestRecord, ServerPart, SpanService, SpanTiming
from ttftscope.tracing.names import (
    CLIENT_SERVICE,
    ENCODED_TOKENS,
    GATEWAY_SERVICE,
    GATEWAY_SPAN,
    REUSED_TOKENS,
    VLLM_SPAN,
)
from ttftscope.tracing.otlpdecode import Span
from ttftscope.tracing.store import SpanStore
from ttftscope.tracing.vllmspan import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    REQUEST_ID,
    VllmTiming,
    sent_request_id,
    vllm_timing,
)

AGREE_MS = 2.0
_TOLERANCE_MS = 1.0  # as decompose's checks: clocks of different processes, rounding
CHECK = "span_matches_histogram"
_COUNTED = (REUSED_TOKENS, ENCODED_TOKENS, PROMPT_TOKENS, COMPLETION_TOKENS)
_SERVICES: dict[str, SpanService] = {CLIENT_SERVICE: "client", GATEWAY_SERVICE: "gateway"}


def request_key(rec: RequestRecord) -> str | None:
    """What a record's spans are found by: the ``X-Request-Id`` it was sent with (its trace
    id when the trace is ours), else its trace id (records written before ``request_id``)."""
    return rec.request_id or rec.trace_id


def spans_for(rec: RequestRecord, spans: Sequence[Span]) -> list[Span]:
    """The spans of ``rec``'s trace, and a vLLM span that carries its request id.

    >>> spans_for(RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True), [])
    []
    """
    key = request_key(rec)
    if key is None:
        return []
    return [
        s
        for s in spans
        if s.trace_id == key
        or (s.name == VLLM_SPAN and sent_request_id(_str(s.attributes.get(REQUEST_ID))) == key)
    ]


def join_records(records: Sequence[RequestRecord], spans: Sequence[Span]) -> int:
    """:func:`apply_spans` for every record that has spans; returns how many got a vLLM span.

    >>> join_records([], [])
    0
    """
    by_key: dict[str, list[Span]] = {}
    for span in spans:
        by_key.setdefault(span.trace_id, []).append(span)
        if span.name == VLLM_SPAN:
            sent = sent_request_id(_str(span.attributes.get(REQUEST_ID)))
            if sent is not None and sent != span.trace_id:
                by_key.setdefault(sent, []).append(span)
    joined = 0
    for rec in records:
        key = request_key(rec)
        found = by_key.get(key, []) if key is not None else []
        if found:
            apply_spans(rec, found)
            joined += rec.part_sources.get("server_ttft_ms") == "span"
    return joined


async def await_spans(
    rec: RequestRecord, store: SpanStore, wait_s: float, *, client_span_id: str | None = None
) -> RequestRecord:
    """Wait up to ``wait_s`` for vLLM's span of ``rec`` (vLLM exports it a batch delay after
    the request finishes), then :func:`apply_spans` what arrived; the same record.

    ``client_span_id`` is the span id our ``traceparent`` carried. When vLLM's span has
    another parent, a hop in between (our gateway) continued the trace and exports its own
    spans: they are waited for too, within the same ``wait_s``. A hop that only passes
    ``traceparent`` on leaves vLLM's parent ours, and nothing more is waited for.
    """
    key = request_key(rec)
    if key is None:
        return rec
    t0 = time.monotonic()
    spans = await store.wait_async(key, (VLLM_SPAN,), timeout_s=wait_s)
    if _hop_continued(spans, client_span_id):
        left = max(0.0, wait_s - (time.monotonic() - t0))
        spans = await store.wait_async(key, (VLLM_SPAN, GATEWAY_SPAN), timeout_s=left)
    return join_waited(rec, spans, wait_s)


def join_waited(rec: RequestRecord, spans: Sequence[Span], wait_s: float) -> RequestRecord:
    """:func:`apply_spans` after a wait of ``wait_s`` for ``spans``, with a note saying why
    there may be none when vLLM's is not among them; the same record.

    >>> rec = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True)
    >>> join_waited(rec, [], 3.0).notes[0][:35]
    'no vLLM span for this request withi'
    """
    if spans:
        apply_spans(rec, spans)
    if not any(s.name == VLLM_SPAN for s in spans):
        rec.notes.append(
            f"no vLLM span for this request within {wait_s:g} s: does vLLM export here "
            "(--otlp-traces-endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf) "
            "more often than that (OTEL_BSP_SCHEDULE_DELAY, 5000 ms unless set)?"
        )
    return rec


def _hop_continued(spans: Sequence[Span], client_span_id: str | None) -> bool:
    """Whether vLLM's span names a parent other than our client span, with no gateway span
    in yet: a hop between us and vLLM made spans of its own."""
    if client_span_id is None or any(s.name == GATEWAY_SPAN for s in spans):
        return False
    parents = {s.parent_span_id for s in spans if s.name == VLLM_SPAN}
    return bool(parents) and parents != {client_span_id} and None not in parents


def apply_spans(rec: RequestRecord, spans: Sequence[Span]) -> RequestRecord:
    """Fill ``rec`` from the spans of its trace (see the module docstring); the same record."""
    vllm = _vllm_of(rec, spans)
    if vllm is not None:
        _server_figures(rec, vllm)
    gateway = _gateway_ms(spans)
    if gateway is not None:
        rec.gateway_ms = gateway
    origin = _origin_ns(rec, spans)
    rec.spans = sorted(
        (_timing(s, origin) for s in spans), key=lambda t: (t.start_ms, t.service, t.name)
    )
    return rec


def _vllm_of(rec: RequestRecord, spans: Sequence[Span]) -> VllmTiming | None:
    timings = [t for t in map(vllm_timing, spans) if t is not None]
    # one request, one llm_request span; several of this request (a retried hop): the last.
    # Never another request's: a trace may hold many (the caller's own traceparent)
    key = request_key(rec)
    mine = [t for t in timings if t.sent_request_id in (None, key)]
    return mine[-1] if mine else None


def _server_figures(rec: RequestRecord, vllm: VllmTiming) -> None:
    figures: dict[ServerPart, float | None] = {
        "server_ttft_ms": vllm.server_ttft_ms,
        "queue_ms": vllm.queue_ms,
        "prefill_ms": vllm.prefill_ms,
        "server_frontend_ms": vllm.frontend_ms,
    }
    diffs: dict[str, float] = {}
    for part, value in figures.items():
        if value is None:
            continue
        before = getattr(rec, part)
        # the front end is a remainder of the other three: compared through them
        compared = part != "server_frontend_ms" and rec.part_sources.get(part) != "span"
        if before is not None and compared:
            diffs[part] = abs(value - before)
        setattr(rec, part, value)
        rec.part_sources[part] = "span"
    _recheck(rec)
    if diffs:
        agree = all(d <= AGREE_MS for d in diffs.values())
        rec.checks[CHECK] = agree
        if not agree:
            worst = max(diffs, key=lambda k: diffs[k])
            rec.notes.append(
                f"vLLM's span and the /metrics delta disagree on {worst} by "
                f"{diffs[worst]:.1f} ms (more than {AGREE_MS:.0f} ms); the span's figure is kept"
            )


def _recheck(rec: RequestRecord) -> None:
    """The remainders and the checks that read the server figures, now from the span."""
    ttft, queue, prefill = rec.server_ttft_ms, rec.queue_ms, rec.prefill_ms
    if ttft is not None and rec.wire_ttft_ms is not None:
        rec.outside_server_ms = rec.wire_ttft_ms - ttft
        rec.checks["server_ttft_le_client"] = ttft <= rec.wire_ttft_ms + _TOLERANCE_MS
    if ttft is not None and queue is not None and prefill is not None:
        rec.checks["queue_prefill_le_server_ttft"] = queue + prefill <= ttft + _TOLERANCE_MS


def _gateway_ms(spans: Sequence[Span]) -> float | None:
    """Received to sent upstream: the gateway span's start to its ``upstream`` child's."""
    gateway = next(
        (s for s in spans if s.name == GATEWAY_SPAN and s.service == GATEWAY_SERVICE), None
    )
    if gateway is None:
        return None
    children = [s for s in spans if s.parent_span_id == gateway.span_id]
    upstream = next((s for s in children if s.name == "upstream"), None)
    if upstream is not None:
        return (upstream.start_unix_ns - gateway.start_unix_ns) / 1e6
    if children:  # no hop recorded (a failed request): its own stages
        return sum(s.duration_ns for s in children) / 1e6
    return gateway.duration_ns / 1e6


def _origin_ns(rec: RequestRecord, spans: Sequence[Span]) -> int:
    if rec.t_wall is not None:
        return round(rec.t_wall * 1e9)
    return min((s.start_unix_ns for s in spans), default=0)


def _timing(span: Span, origin_ns: int) -> SpanTiming:
    counts = {
        k: v
        for k in _COUNTED
        if isinstance(v := span.attributes.get(k), int) and not isinstance(v, bool)
    }
    return SpanTiming(
        service=_SERVICES.get(span.service, "server"),
        name=span.name,
        start_ms=(span.start_unix_ns - origin_ns) / 1e6,
        end_ms=(span.end_unix_ns - origin_ns) / 1e6,
        counts=counts,
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
