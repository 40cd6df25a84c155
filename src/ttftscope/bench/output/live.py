"""Running statistics while a bench goes: TTFT percentiles, counts, the waiting queue.

What a progress display shows; the summary is computed afresh from the records at the end.
Only measured requests count (warmups are not), and only successful ones have a TTFT.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ttftscope.errors import FailureKind
from ttftscope.records import RequestRecord
from ttftscope.stats import percentile


@dataclass
class LiveStats:
    """Counts and TTFTs of the measured requests so far.

    >>> s = LiveStats(total=3)
    >>> for ms in (30.0, 10.0, 20.0):
    ...     s.add(RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                       client_ttft_ms=ms))
    >>> s.completed, s.ttft_percentile(50), s.line()
    (3, 20.0, 'TTFT p50 20 ms p99 30 ms · ok 3 · failed 0')
    """

    total: int = 0
    completed: int = 0
    failed: int = 0
    rate_limited: int = 0
    waiting: float | None = None
    _ttfts: list[float] = field(default_factory=list)

    def add(self, rec: RequestRecord) -> None:
        """Count one finished request (warmups are ignored)."""
        if rec.phase == "warmup":
            return
        if not rec.ok:
            self.failed += 1
            self.rate_limited += rec.error_kind is FailureKind.RATE_LIMITED
            return
        self.completed += 1
        if rec.client_ttft_ms is not None:
            bisect.insort(self._ttfts, rec.client_ttft_ms)

    def ttft_percentile(self, q: float) -> float | None:
        """The TTFTs' percentile so far, computed as the summary's (``stats.percentile``)."""
        return percentile(self._ttfts, q)

    def line(self) -> str:
        """One status line: TTFT p50/p99, completed, failed, and the waiting queue if known."""
        p50, p99 = self.ttft_percentile(50), self.ttft_percentile(99)
        parts = [f"TTFT p50 {_ms(p50)} p99 {_ms(p99)}", f"ok {self.completed}"]
        failed = f"failed {self.failed}"
        if self.rate_limited:
            failed += f" (429: {self.rate_limited})"
        parts.append(failed)
        if self.waiting is not None:
            parts.append(f"waiting {self.waiting:g}")
        return " · ".join(parts)


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"
