"""Split one request's TTFT into its parts and check what can be checked.

Client TTFT runs from the start of client work (tokenization, serialization) to the first
SSE event that carries content. The server's own histograms (vLLM V1 semantics) give server
TTFT (arrival, before rendering and tokenization, to first token), queue and prefill. Two of
the parts we report are remainders:

- server front end = server TTFT − queue − prefill (rendering, tokenization, IPC)
- outside the server = client TTFT − server TTFT − measured client work (network, HTTP and
  JSON parsing before the server stamps arrival)

Remainders always sum back, so summing proves nothing. What *can* fail is checked instead:
server TTFT ≤ wire TTFT, queue + prefill ≤ server TTFT, and every histogram advanced by exactly
one observation (otherwise another client shared the server and the sample is marked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ttftscope.client.stream import StreamResult
from ttftscope.metrics.engines import ServerBreakdown
from ttftscope.records import Phase, RequestRecord, ServerPart, Variant

# Histogram sums are exact but come from different processes' clocks; allow rounding noise.
_TOLERANCE_MS = 1.0
_SERVER_PARTS: tuple[ServerPart, ...] = (
    "server_ttft_ms",
    "queue_ms",
    "prefill_ms",
    "server_frontend_ms",
    "server_render_ms",
)


def seconds_ms(seconds: float | None) -> float | None:
    """A histogram's seconds in ms; a missing or non-finite value is no value.

    >>> seconds_ms(0.25), seconds_ms(float("nan"))
    (250.0, None)
    """
    return None if seconds is None or not math.isfinite(seconds) else seconds * 1000.0


@dataclass(frozen=True)
class RequestIdentity:
    """Which request of a run a record describes."""

    run_id: str
    index: int
    variant: Variant
    phase: Phase
    context_tokens: int = 0


def client_record(
    result: StreamResult,
    who: RequestIdentity,
    *,
    tokenize_ms: float | None,
    client_tokens: int | None = None,
) -> RequestRecord:
    """A record holding what the client measured of one request.

    >>> r = client_record(StreamResult(ok=True), RequestIdentity("r", 0, "chat", "warm"),
    ...                   tokenize_ms=None)
    >>> r.ok, r.client_ttft_ms
    (True, None)
    """
    ph = result.phases
    wire = ph.first_content_ms
    work = (tokenize_ms or 0.0) + (result.serialize_ms or 0.0)
    return RequestRecord(
        run_id=who.run_id,
        index=who.index,
        variant=who.variant,
        phase=who.phase,
        context_tokens_target=who.context_tokens,
        client_tokens=client_tokens,
        ok=result.ok,
        status=result.status,
        error_kind=result.error_kind,
        error=result.error,
        retry_after=result.retry_after,
        model=result.model,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        wire_ttft_ms=wire,
        client_ttft_ms=None if wire is None else wire + work,
        connect_ms=ph.connect_ms,
        request_sent_ms=ph.request_sent_ms,
        headers_ms=ph.headers_ms,
        first_event_ms=ph.first_event_ms,
        last_byte_ms=ph.last_byte_ms,
        serialize_ms=result.serialize_ms,
        tokenize_ms=tokenize_ms,
        request_bytes=result.request_bytes,
        t_wall=result.t0_wall,
    )


def add_server_view(rec: RequestRecord, bd: ServerBreakdown) -> RequestRecord:
    """Fill the fields derived from the server's metric deltas, then run the checks.

    Returns the same record (see :func:`run_checks`). The probe, bench and ``instrument``
    all fill the server's view here, so their records agree on what the parts mean.
    """
    rec.server_ttft_ms = seconds_ms(bd.ttft_s)
    rec.queue_ms = seconds_ms(bd.queue_s)
    rec.prefill_ms = seconds_ms(bd.prefill_s)
    rec.server_frontend_ms = seconds_ms(bd.frontend_s)
    rec.server_render_ms = seconds_ms(bd.render_s)
    for part in _SERVER_PARTS:
        if getattr(rec, part) is not None:
            rec.part_sources[part] = "histogram"
    if rec.server_ttft_ms is not None and rec.wire_ttft_ms is not None:
        rec.outside_server_ms = rec.wire_ttft_ms - rec.server_ttft_ms
    rec.prefix_queries = bd.prefix_queries
    rec.prefix_hits = bd.prefix_hits
    rec.prefix_hit_rate = bd.prefix_hit_rate
    rec.computed_tokens = bd.computed_tokens
    return run_checks(rec, bd)


def run_checks(rec: RequestRecord, bd: ServerBreakdown) -> RequestRecord:
    """Fill ``rec.checks`` and ``rec.contaminated``; returns the same record.

    A check whose inputs are missing is left out rather than reported as passed.
    """
    checks: dict[str, bool] = {}
    if rec.server_ttft_ms is not None and rec.wire_ttft_ms is not None:
        checks["server_ttft_le_client"] = rec.server_ttft_ms <= rec.wire_ttft_ms + _TOLERANCE_MS
    if None not in (rec.queue_ms, rec.prefill_ms, rec.server_ttft_ms):
        assert rec.queue_ms is not None and rec.prefill_ms is not None
        assert rec.server_ttft_ms is not None
        checks["queue_prefill_le_server_ttft"] = (
            rec.queue_ms + rec.prefill_ms <= rec.server_ttft_ms + _TOLERANCE_MS
        )
    if rec.server_render_ms is not None and rec.server_frontend_ms is not None:
        # the server's own render time is part of the front end the remainder stands for
        checks["render_le_frontend"] = (
            rec.server_render_ms <= rec.server_frontend_ms + _TOLERANCE_MS
        )
    counts = {
        "ttft": bd.ttft_count,
        "queue": bd.queue_count,
        "prefill": bd.prefill_count,
        "e2e": bd.e2e_count,
        "render": bd.render_count,
    }
    seen = {k: v for k, v in counts.items() if v is not None}
    if seen:
        checks["one_observation_each"] = all(v == 1 for v in seen.values())
        if any(v > 1 for v in seen.values()):
            rec.contaminated = True
            rec.notes.append(
                "another client used the server during this request "
                f"(histogram observations: {seen}); sample marked, not trusted"
            )
    rec.checks = checks
    rec.notes.extend(bd.notes)
    return rec
