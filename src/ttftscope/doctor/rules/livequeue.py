"""Finding: requests wait in the server's queue now (``doctor``'s live ``/metrics`` samples).

The rule: the waiting gauge is above 0 in at least half of at least three scrapes. One
scrape that caught a request between arriving and being scheduled is not a queue; a gauge
that stays up is. The server's own limits are read where it exports them (the KV cache's
size in ``vllm:cache_config_info``, ``--max-num-seqs`` from ``/server_info``), and where it
does not, the finding says so instead of guessing.
"""

from __future__ import annotations

from ttftscope.doctor.rules.limits import Concurrency, remedy_for
from ttftscope.doctor.rules.server import NOT_TOKENIZATION
from ttftscope.doctor.sampling import LiveSamples, peak
from ttftscope.doctor.serverfacts import ServerFacts
from ttftscope.findings import Evidence, Finding
from ttftscope.stats import median

__all__ = ["MIN_SAMPLES", "STAYS_SHARE", "live_queue_findings"]

MIN_SAMPLES = 3
STAYS_SHARE = 0.5  # waiting above 0 in at least this share of the scrapes


def _concurrency(s: LiveSamples) -> Concurrency:
    both = [g for g in s.samples if g.running is not None and g.waiting is not None]
    return Concurrency(
        peak_running=peak([g.running for g in s.samples]),
        running_while_waiting=peak([g.running for g in both if (g.waiting or 0) > 0]),
        peak_in_flight=peak([(g.running or 0) + (g.waiting or 0) for g in both]),
        peak_kv_usage=peak([g.kv_usage for g in s.samples]),
    )


def _facts(s: LiveSamples, server: ServerFacts | None) -> list[str]:
    facts = [s.figures()]
    running = [g.running for g in s.samples if g.running is not None]
    if running:
        mid = median(running) or 0.0
        facts.append(
            f"running {min(running):.0f} / {mid:.0f} / {max(running):.0f} (min / median / max)"
        )
    kv = peak([g.kv_usage for g in s.samples])
    if kv is not None:
        facts.append(f"KV cache usage peaked at {kv:.0%}")
    if s.mean_queue_ms is not None:
        facts.append(
            f"{s.finished} request(s) finished in the window after a mean "
            f"{s.mean_queue_ms:,.0f} ms in the queue"
        )
    limits = server.limits() if server is not None else "--max-num-seqs not exported"
    facts.append("the server's limits: " + limits)
    return facts


def live_queue_findings(s: LiveSamples | None, server: ServerFacts | None) -> list[Finding]:
    """``queueing`` when the waiting gauge stayed above 0 over the sampled window.

    >>> from ttftscope.doctor.sampling import Gauges
    >>> busy = LiveSamples("u", 1.0, (Gauges(6, 4),) * 3)
    >>> [f.id for f in live_queue_findings(busy, None)]
    ['queueing']
    >>> live_queue_findings(LiveSamples("u", 1.0, (Gauges(6, 4), Gauges(0, 4), Gauges(0, 4))),
    ...                     None)
    []
    """
    if s is None or len(s.waiting) < MIN_SAMPLES or s.waited_share < STAYS_SHARE:
        return []
    limit = server.max_num_seqs if server is not None else None
    return [
        Finding(
            id="queueing",
            severity="warning",
            title=f"requests wait in the server's queue now ({s.waited_share:.0%} of "
            f"{len(s.waiting)} /metrics scrapes)",
            evidence=[Evidence(fact=f, source=s.source) for f in _facts(s, server)],
            remedy=NOT_TOKENIZATION + remedy_for(_concurrency(s), limit),
            saving_ms=None if s.mean_queue_ms is None else round(s.mean_queue_ms, 1),
            part_ms=s.mean_queue_ms,
        )
    ]
