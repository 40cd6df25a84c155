"""One probe request, measured: scrape, (tokenize), stream, scrape until settled, check.

The server's histogram deltas between the scrapes before and after are that request's own
values because a probe sends one request at a time. A failure that every later request would
meet too (unreachable, auth, wrong model or URL, not an API) stops the probe with its own
error; a missing ``/metrics`` only leaves a note on each record.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from ttftscope.client.endpoint import Endpoint
from ttftscope.client.ping import explain_not_found
from ttftscope.client.stream import (
    CompletionPath,
    StreamResult,
    raise_for_result,
    stream_completion,
)
from ttftscope.decompose import RequestIdentity, add_server_view, client_record
from ttftscope.errors import UNREACHABLE_KINDS, FailureKind, MetricsError, ModelNotFound
from ttftscope.metrics.engines import ServerBreakdown, queue_depth, server_breakdown
from ttftscope.metrics.prom import MetricsSnapshot, metrics_delta
from ttftscope.metrics.scrape import ascrape_metrics
from ttftscope.records import PROBE_TOKENIZED, Phase, RequestRecord, Variant
from ttftscope.tracing.context import TraceContext, request_id_in, with_trace
from ttftscope.tracing.join import await_spans
from ttftscope.tracing.store import SpanStore

__all__ = ["ProbeRequest", "RequestSender"]

# Failures that make every later request fail the same way: stop and say so.
_FATAL = UNREACHABLE_KINDS | {
    FailureKind.AUTH_ERROR,
    FailureKind.NOT_FOUND,
    FailureKind.BAD_RESPONSE,
}


@dataclass
class ProbeRequest:
    """One request of an experiment: its variant, where it goes and what it carries.

    >>> ProbeRequest("chat", "/chat/completions", {"messages": []}).base_url is None
    True
    """

    variant: Variant
    path: CompletionPath
    body: dict[str, object]
    tokenize: Callable[[], int] | None = None  # client-side tokenization, timed when present
    base_url: str | None = None  # another address than the endpoint's (the gateway)


class RequestSender:
    """Sends probe requests one at a time; each becomes a checked :class:`RequestRecord`,
    handed to ``sink`` with the trace context of its client span (None: the caller's own).
    (``run_probe`` shows it at work.)
    """

    def __init__(
        self,
        ep: Endpoint,
        client: httpx.AsyncClient,
        *,
        run_id: str,
        settle_s: float,
        spans: SpanStore | None,
        span_wait_s: float,
        sink: Callable[[RequestRecord, TraceContext | None], None],
    ) -> None:
        self.ep, self.client, self.run_id = ep, client, run_id
        self.settle_s = settle_s
        self.spans, self.span_wait_s = spans, span_wait_s
        self._emit = sink
        self.index = 0
        self._metrics_error = ""

    async def send(self, req: ProbeRequest, phase: Phase, context_tokens: int) -> RequestRecord:
        """One request: scrape, (tokenize), stream, scrape until settled, record, check."""
        before = await self._scrape()
        tokenize_ms = None
        client_tokens = None
        if req.tokenize is not None:
            t = time.perf_counter_ns()
            client_tokens = req.tokenize()
            tokenize_ms = (time.perf_counter_ns() - t) / 1e6
        headers, trace, ours = with_trace(self.ep.headers)
        result = await stream_completion(
            self.client,
            base_url=req.base_url or self.ep.base_url,
            path=req.path,
            body=req.body,
            api_key=self.ep.api_key,
            timeout_s=self.ep.timeout_s,
            headers=headers,
        )
        who = RequestIdentity(self.run_id, self.index, req.variant, phase, context_tokens)
        rec = client_record(result, who, tokenize_ms=tokenize_ms, client_tokens=client_tokens)
        if tokenize_ms is not None:
            rec.notes.append(PROBE_TOKENIZED)
        rec.trace_id = None if trace is None else trace.trace_id
        rec.request_id = request_id_in(headers)
        span_ctx = trace if ours else None  # a traceparent the user set names their span
        self.index += 1
        if result.error_kind in _FATAL:
            self._emit(rec, span_ctx)
            await self._raise_fatal(result)  # nothing to measure without a server
        if before is None:
            rec.notes.append(f"no server metrics: {self._metrics_error}")
        elif result.ok:
            rec.waiting_before = queue_depth(before, model=self.ep.model)[1]
            add_server_view(rec, await self._settled_breakdown(before))
        if self.spans is not None and result.ok:
            span_id = None if trace is None else trace.span_id
            await await_spans(rec, self.spans, self.span_wait_s, client_span_id=span_id)
        self._emit(rec, span_ctx)
        return rec

    async def _raise_fatal(self, result: StreamResult) -> None:
        try:
            raise_for_result(result)
        except ModelNotFound as exc:  # a wrong model name, or a wrong base URL: say which
            served = functools.partial(self.ep.list_models, self.client)
            raise await explain_not_found(
                self.ep.model, exc, served, base_url=self.ep.base_url
            ) from None

    async def _settled_breakdown(self, before: MetricsSnapshot) -> ServerBreakdown:
        # vLLM records queue/prefill/e2e when the request finishes, a moment after [DONE]
        deadline = time.monotonic() + self.settle_s
        while True:
            after = await self._scrape()
            if after is None:
                return ServerBreakdown(
                    engine="unknown",
                    notes=[f"metrics scrape failed after the request: {self._metrics_error}"],
                )
            bd = server_breakdown(metrics_delta(before, after), model=self.ep.model)
            counts = (bd.ttft_count, bd.e2e_count)
            settled = all(c is None or c >= 1 for c in counts)
            if settled or time.monotonic() > deadline:
                if not settled:
                    bd.notes.append(
                        "server metrics did not advance within "
                        f"{self.settle_s:.0f}s of the response"
                    )
                return bd
            await asyncio.sleep(0.02)

    async def _scrape(self) -> MetricsSnapshot | None:
        """A metrics snapshot, or None (reason kept) when the server exposes none."""
        try:
            return await ascrape_metrics(
                self.ep.metrics_url, client=self.client, headers=self.ep.scrape_headers()
            )
        except MetricsError as exc:
            self._metrics_error = exc.message
            return None
