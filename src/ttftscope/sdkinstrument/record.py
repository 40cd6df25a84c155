"""Turn one instrumented SDK call into a :class:`~ttftscope.records.RequestRecord`.

Runs on the background worker, never in the user's call. Client times are milliseconds from
the start of the user's ``create()`` call: for a stream, ``headers_ms`` is when ``create()``
returned (the SDK returns once the response headers are in), ``client_ttft_ms`` the first
chunk that carries output and ``last_byte_ms`` the end of the stream. A non-streaming call
shows no first token: only ``last_byte_ms`` and ``e2el_ms`` (its total) are set.

The SDK's exceptions are classified onto :class:`~ttftscope.errors.FailureKind` here, from
the exception object the call raised (the user got that same object).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ttftscope.client.classify import failure_kind, server_text
from ttftscope.config.redact import redact_text
from ttftscope.decompose import add_server_view as server_view
from ttftscope.decompose import seconds_ms
from ttftscope.errors import FailureKind, TransportFailure, os_failure
from ttftscope.metrics.engines import ServerBreakdown
from ttftscope.records import RequestRecord, ServerPart
from ttftscope.sdkinstrument.calls import Call

RUN_PREFIX = "instrument-"
NOT_ATTRIBUTABLE = "concurrent: queue not attributable"


@dataclass(frozen=True)
class Failure:
    """A failed call, classified."""

    kind: FailureKind | None
    message: str
    status: int | None = None
    retry_after: str | None = None


def _ms(start: int, stamp: int | None) -> float | None:
    return None if stamp is None else (stamp - start) / 1e6


def classify(exc: BaseException, *, secrets: Sequence[str]) -> Failure:
    """Map an exception the SDK raised onto a failure kind, with a message free of secrets.

    >>> import httpx2, openai
    >>> req = httpx2.Request("POST", "http://h/v1/chat/completions")
    >>> resp = httpx2.Response(429, headers={"retry-after": "3"}, request=req)
    >>> f = classify(openai.RateLimitError("slow", response=resp, body=None), secrets=[])
    >>> str(f.kind), f.status, f.retry_after
    ('rate_limited', 429, '3')
    """
    import openai  # the worker only gets here after the SDK raised, so it is loaded

    message = redact_text(server_text(str(exc) or type(exc).__name__, 500), secrets)
    if isinstance(exc, openai.APITimeoutError):
        return Failure(FailureKind.TIMEOUT, message)
    if isinstance(exc, openai.APIConnectionError):
        # the SDK's own HTTP stack chains the operating system's error (refused, DNS, TLS)
        return Failure(failure_kind(os_failure(exc) or TransportFailure.CONNECT), message)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry = exc.response.headers.get("retry-after")
        return Failure(_status_kind(status), message, status, retry if status == 429 else None)
    if isinstance(exc, openai.APIError):  # an error event inside a stream
        return Failure(FailureKind.STREAM_ERROR, message)
    if isinstance(exc, Exception):
        return Failure(FailureKind.REQUEST_ERROR, f"{type(exc).__name__}: {message}")
    # KeyboardInterrupt, task cancellation: the caller stopped, nothing failed on the wire
    return Failure(None, f"interrupted ({type(exc).__name__})")


def _status_kind(status: int) -> FailureKind:
    if status in (401, 403):
        return FailureKind.AUTH_ERROR
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status >= 500:
        return FailureKind.SERVER_ERROR
    return FailureKind.HTTP_ERROR


def _usage_int(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) else None


def _cached(usage: Any) -> int | None:
    details = getattr(usage, "prompt_tokens_details", None)
    return _usage_int(details, "cached_tokens") if details is not None else None


def client_record(
    call: Call, *, run_id: str, url: str, secrets: Sequence[str], log_tokens: bool
) -> RequestRecord:
    """The client's view of one call (no server fields yet)."""
    rec = RequestRecord(
        run_id=run_id,
        index=call.index,
        variant=call.variant,
        phase="warm",
        ok=call.error is None,
        model=call.response_model or call.model,
        t_wall=call.t_wall,
        trace_id=call.trace_id,
        request_id=call.request_id,
        notes=[
            "instrument",
            f"endpoint: {call.endpoint}",
            "stream" if call.stream else "no-stream",
        ],
    )
    if call.error is not None:
        fail = classify(call.error, secrets=secrets)
        if call.mid_stream and fail.kind == FailureKind.REQUEST_ERROR:
            fail = Failure(FailureKind.STREAM_ERROR, fail.message)
        rec.error_kind, rec.error = fail.kind, fail.message
        rec.status, rec.retry_after = fail.status, fail.retry_after
    elif call.stream or call.returned_ns is not None:
        rec.status = 200
    _fill_times(rec, call)
    if log_tokens and call.usage is not None:
        rec.prompt_tokens = _usage_int(call.usage, "prompt_tokens")
        rec.completion_tokens = _usage_int(call.usage, "completion_tokens")
        rec.cached_tokens = _cached(call.usage)
    if call.abandoned:
        rec.notes.append("stream closed or dropped before its end: times up to then")
    _fill_pace(rec)
    return rec


def _fill_times(rec: RequestRecord, call: Call) -> None:
    t0 = call.start_ns
    end = call.end_ns
    if not call.stream:
        rec.last_byte_ms = rec.e2el_ms = _ms(t0, end)
        return
    rec.headers_ms = _ms(t0, call.returned_ns)
    rec.first_event_ms = _ms(t0, call.first_event_ns)
    rec.client_ttft_ms = rec.wire_ttft_ms = _ms(t0, call.first_content_ns)
    rec.content_chunks = call.content_chunks
    if call.error is None and not call.abandoned:
        rec.last_byte_ms = rec.e2el_ms = _ms(t0, end)
    if call.content_chunks > 1 and call.first_content_ns is not None:
        span = (call.last_content_ns or call.first_content_ns) - call.first_content_ns
        rec.itl_mean_ms = span / 1e6 / (call.content_chunks - 1)
        rec.itl_max_ms = call.max_gap_ns / 1e6


def _fill_pace(rec: RequestRecord) -> None:
    n = rec.completion_tokens
    if rec.e2el_ms is not None and rec.client_ttft_ms is not None and n is not None and n > 1:
        rec.tpot_ms = (rec.e2el_ms - rec.client_ttft_ms) / (n - 1)


Attribution = Literal["all", "finish", "none"]


def attributable(bd: ServerBreakdown, *, next_started: bool = False) -> Attribution:
    """How much of a metrics window is one call's.

    ``"all"``: every histogram advanced by exactly one observation and no later call started
    before the scrape. ``"finish"``: only the histograms vLLM observes when a request
    finishes (queue, prefill, e2e) did — the next call had started, and its first token or
    prompt may be in the window. ``"none"``: other traffic.

    >>> attributable(ServerBreakdown("vllm-v1", ttft_count=1.0, e2e_count=1.0))
    'all'
    >>> attributable(ServerBreakdown("vllm-v1", ttft_count=2.0, queue_count=1.0, e2e_count=1.0))
    'finish'
    >>> attributable(ServerBreakdown("vllm-v1", ttft_count=2.0, e2e_count=2.0))
    'none'
    """
    finish = [c for c in (bd.queue_count, bd.prefill_count, bd.e2e_count) if c is not None]
    if not finish or any(c != 1 for c in finish):
        return "none"
    if bd.ttft_count in (None, 1.0) and not next_started:
        return "all"
    return "finish" if bd.queue_count is not None else "none"


def add_finish_view(rec: RequestRecord, bd: ServerBreakdown) -> None:
    """Queue and prefill only: the window also holds the start of the next call.

    >>> rec = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True)
    >>> add_finish_view(rec, ServerBreakdown("vllm-v1", queue_s=0.002, prefill_s=0.010))
    >>> rec.queue_ms, rec.part_sources
    (2.0, {'queue_ms': 'histogram', 'prefill_ms': 'histogram'})
    """
    rec.queue_ms = seconds_ms(bd.queue_s)
    rec.prefill_ms = seconds_ms(bd.prefill_s)
    parts: tuple[ServerPart, ...] = ("queue_ms", "prefill_ms")
    for part in parts:
        if getattr(rec, part) is not None:
            rec.part_sources[part] = "histogram"  # as decompose marks its figures
    rec.checks = {"one_observation_each": False}
    rec.notes.append(
        "the next call started before the metrics scrape: queue and prefill (recorded "
        "when a request finishes) are this call's, server TTFT and prefix hits are not known"
    )


def add_server_view(rec: RequestRecord, bd: ServerBreakdown, *, log_tokens: bool) -> None:
    """Fill the server's side of one call from an attributable metrics window, then check.

    The parts and checks are the probe's (:func:`ttftscope.decompose.add_server_view`); a
    call's usage may lack prompt tokens, which the window then supplies.
    """
    server_view(rec, bd)
    if log_tokens and rec.prompt_tokens is None and bd.prompt_tokens is not None:
        rec.prompt_tokens = round(bd.prompt_tokens)
        rec.notes.append("prompt_tokens from /metrics (the response carried no usage)")
