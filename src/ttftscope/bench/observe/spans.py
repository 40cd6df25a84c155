"""Each bench record joined with vLLM's span of its request, under any concurrency.

With a trace receiver running (``BenchOptions.trace_port``), a finished request's record
waits, off the request path, for vLLM's ``llm_request`` span (vLLM exports it a batch delay
after the request finishes) and takes its queue, prefill and server TTFT (``part_sources``
"span"); then it is written. The workers never wait for spans, so the load is what it would
be without them. At the end of the run the records still waiting get what arrived by then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ttftscope.records import RequestRecord
from ttftscope.tracing.join import await_spans, request_key
from ttftscope.tracing.store import SpanStore


class SpanJoiner:
    """Hands each record to ``then`` once its spans are joined (or waited for in vain)."""

    def __init__(self, store: SpanStore, wait_s: float) -> None:
        self.store, self.wait_s = store, wait_s
        self._pending: set[asyncio.Task[None]] = set()

    def later(
        self,
        rec: RequestRecord,
        then: Callable[[RequestRecord], None],
        client_span_id: str | None = None,
    ) -> None:
        """Join ``rec`` in the background, then call ``then(rec)``; a record that failed goes
        on at once (vLLM makes a span only for a request that finished). ``client_span_id``:
        the span id of the ``traceparent`` sent, if ours (see :func:`await_spans`)."""
        if not rec.ok or request_key(rec) is None:
            then(rec)
            return
        task = asyncio.create_task(self._join(rec, then, client_span_id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _join(
        self,
        rec: RequestRecord,
        then: Callable[[RequestRecord], None],
        client_span_id: str | None,
    ) -> None:
        try:
            await await_spans(rec, self.store, self.wait_s, client_span_id=client_span_id)
        finally:  # cancelled at the end of a run: the record is still written
            then(rec)

    async def drain(self) -> None:
        """Let every waiting record finish its wait (at most ``wait_s`` more), then go on."""
        pending = set(self._pending)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=self.wait_s + 1.0)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._pending)
