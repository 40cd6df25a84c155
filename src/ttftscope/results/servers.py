"""A bench run's servers: which targets share one, and each server's run-wide figures.

A bench records no per-request server parts (requests overlap); its summary's ``servers``
section has, per ``/metrics`` source, the targets behind it and the histogram means over the
run. Targets behind one server (``direct`` and a ``gateway`` in front of the same vLLM) share
those figures: one figure per target would show the same numbers under two names, which reads
as "the gateway changed nothing". So figures are made per server and named by its targets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ttftscope.results.parts import PARTS, Breakdown, Part, summary_breakdown
from ttftscope.results.runs import Run

__all__ = ["ServerFigures", "server_figures"]

_MEANS: tuple[tuple[Part, str], ...] = (
    ("server_frontend", "server_mean_frontend_ms"),
    ("queue", "server_mean_queue_ms"),
    ("prefill", "server_mean_prefill_ms"),
)


@dataclass(frozen=True)
class ServerFigures:
    """One server's run-wide means (``breakdown``) and the targets whose requests they cover.

    >>> ServerFigures(("direct", "gateway"), None).name
    'direct + gateway'
    """

    targets: tuple[str, ...]
    breakdown: Breakdown | None
    others: float = 0.0  # requests in its histograms that none of the run's targets sent
    source: str = ""  # its /metrics, as the sampler names it

    @property
    def shared(self) -> bool:
        """Whether several targets' requests are in these figures."""
        return len(self.targets) > 1

    @property
    def name(self) -> str:
        """The targets behind the server."""
        return " + ".join(self.targets)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _mean(pairs: Sequence[tuple[float | None, float]]) -> float | None:
    """The weighted mean, or ``None`` when any part lacks the figure (no partial average)."""
    if not pairs or any(v is None for v, _ in pairs):
        return None
    total = sum(w for _, w in pairs)
    return sum((v or 0.0) * w for v, w in pairs) / total if total > 0 else None


def _by_source(run: Run) -> dict[str, list[dict[str, Any]]]:
    """Each inference server's entries, one per shard, keyed by its ``/metrics`` source."""
    out: dict[str, list[dict[str, Any]]] = {}
    for summary in run.bench_summaries:
        for source, entry in summary.servers.items():
            if isinstance(entry, dict) and entry.get("engine") not in (None, "unknown"):
                out.setdefault(source, []).append(entry)
    return out


def _figures(run: Run, targets: tuple[str, ...], entries: list[dict[str, Any]]) -> Breakdown | None:
    counts = [(_num(e.get("server_requests")) or 1.0) for e in entries]
    client = [
        (figures.mean_ttft_ms, float(max(figures.completed or 0, 1)))
        for summary in run.bench_summaries
        for name in targets
        if (figures := summary.targets.get(name)) is not None
    ]
    ttft = _mean(client)
    if ttft is None:
        return None

    def server_mean(key: str) -> float | None:
        return _mean([(_num(e.get(key)), w) for e, w in zip(entries, counts, strict=True)])

    found: dict[Part, float | None] = {part: server_mean(key) for part, key in _MEANS}
    server = server_mean("server_mean_ttft_ms")
    found["outside_server"] = None if server is None else max(ttft - server, 0.0)
    parts = tuple((p, v) for p in PARTS if (v := found.get(p)) is not None)
    if not parts:
        return None
    n = sum(
        f.completed or 0
        for s in run.bench_summaries
        for name in targets
        if (f := s.targets.get(name)) is not None
    )
    return Breakdown(n=n, ttft_ms=ttft, parts=parts, stat="mean", source="histograms")


def _completed(run: Run, targets: Iterable[str]) -> float:
    names = set(targets)
    return float(
        sum(
            f.completed or 0
            for s in run.bench_summaries
            for n, f in s.targets.items()
            if n in names
        )
    )


def _reached_through(
    run: Run, named: set[str], entries: list[dict[str, Any]], order: dict[str, int]
) -> set[str]:
    """Targets whose own ``/metrics`` is not an inference server's (a gateway's) but whose
    requests the one server counted: it served exactly their requests on top of its own.

    Bench reads each target's ``/metrics`` at its own address, so a gateway target is listed
    under the gateway, while every request it sends reaches the vLLM behind it.
    """
    orphans = set(order) - named
    served = sum(_num(e.get("server_requests")) or 0.0 for e in entries)
    extra, theirs = served - _completed(run, named), _completed(run, orphans)
    if orphans and theirs > 0 and abs(extra - theirs) <= max(1.0, 0.05 * theirs):
        return orphans
    return set()


def server_figures(run: Run) -> list[ServerFigures]:
    """Per inference server of a bench run, its targets and run-wide means, in target order.

    A summary without a ``servers`` section (or none that is an inference server) gives one
    figure for all the run's targets together: the run-wide means cover all of them. A
    server that counted more requests than its targets sent says so (``others``); when the
    run has one server and the surplus is exactly the requests of the targets that have no
    server of their own (a gateway in front of it), those targets are behind it too.

    >>> server_figures(Run(kind="probe", key="k", label="p", parts=()))
    []
    """
    if run.kind != "bench":
        return []
    order = {name: i for s in run.bench_summaries for i, name in enumerate(s.targets)}
    sources = _by_source(run)
    out = []
    for source, entries in sources.items():
        named = {str(t) for e in entries for t in (e.get("targets") or []) if isinstance(t, str)}
        if not named:
            continue
        if len(sources) == 1:
            named |= _reached_through(run, named, entries, order)
        targets = tuple(sorted(named, key=lambda t: (order.get(t, len(order)), t)))
        served = _num(sum(_num(e.get("server_requests")) or 0.0 for e in entries))
        others = max((served or 0.0) - _completed(run, targets), 0.0)
        out.append(ServerFigures(targets, _figures(run, targets, entries), others, source))
    whole = summary_breakdown(run.bench_summaries)
    if len(out) == 1 and out[0].breakdown is None:  # no per-target figures: the run's are its
        out = [ServerFigures(out[0].targets, whole)]
    if out:
        return sorted(out, key=lambda f: order.get(f.targets[0], len(order)))
    names = list(order) or sorted({r.target for r in run.records if r.target})
    return [ServerFigures(tuple(names), whole)] if whole is not None else []
