"""Prometheus text exposition: parse, snapshot, delta and histogram quantiles.

Scraping over HTTP is :mod:`.scrape`'s.

A probe scrapes ``/metrics`` right before and right after one request; the difference of the
two snapshots is that request's server-side story (histogram ``_sum`` deltas are its exact
values when nothing else ran). Names are kept as they appear in the exposition: counters end in
``_total``, histograms expose ``_bucket{le=..}``, ``_sum`` and ``_count``.

>>> before = parse('# TYPE t histogram\\nt_bucket{le="1.0"} 0\\nt_bucket{le="+Inf"} 0\\n'
...                't_sum 0\\nt_count 0\\n')
>>> after = parse('# TYPE t histogram\\nt_bucket{le="1.0"} 1\\nt_bucket{le="+Inf"} 1\\n'
...               't_sum 0.25\\nt_count 1\\n')
>>> h = delta(before, after).histogram("t")
>>> (h.count, h.sum, h.quantile(0.5))
(1.0, 0.25, 0.5)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ttftscope.errors import MetricsError

Labels = frozenset[tuple[str, str]]
SampleKey = tuple[str, Labels]

# Samples that only ever grow while the process lives; everything else is read as a gauge.
_MONOTONIC_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}


def labels_of(mapping: Mapping[str, str] | None = None, **kw: str) -> Labels:
    """Freeze a label mapping into a hashable label set.

    >>> sorted(labels_of({"model_name": "m"}, engine="0"))
    [('engine', '0'), ('model_name', 'm')]
    """
    return frozenset({**(mapping or {}), **kw}.items())


def _matches(labels: Labels, match: Mapping[str, str] | None) -> bool:
    return not match or all((k, v) in labels for k, v in match.items())


@dataclass(frozen=True)
class HistogramDelta:
    """One histogram (summed over the selected label sets): cumulative buckets, sum, count.

    >>> HistogramDelta("t", 2.0, 2.0, ((1.0, 1.0), (math.inf, 2.0))).mean
    1.0
    """

    name: str
    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), sorted, ends at +Inf

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """Estimated ``q``-quantile of the observations, see :func:`histogram_quantile`."""
        return histogram_quantile(self.buckets, q)


@dataclass(frozen=True)
class SampleView:
    """Samples keyed by (sample name, label set), plus which family and type each name has."""

    samples: Mapping[SampleKey, float]
    families: Mapping[str, str]  # family name -> type (counter, gauge, histogram, ...)
    sample_family: Mapping[str, str]  # sample name -> family name

    def series(self, name: str, match: Mapping[str, str] | None = None) -> dict[Labels, float]:
        """Every label set of sample ``name`` whose labels include ``match``, with its value."""
        return {
            lab: v for (n, lab), v in self.samples.items() if n == name and _matches(lab, match)
        }

    def value(self, name: str, match: Mapping[str, str] | None = None) -> float | None:
        """Sum of sample ``name`` over the matching label sets; None when none match."""
        found = self.series(name, match)
        return math.fsum(found.values()) if found else None

    def has(self, name: str) -> bool:
        """True when ``name`` is a family or sample name present in the exposition."""
        return name in self.families or name in self.sample_family

    def label_values(self, label: str, prefix: str = "") -> list[str]:
        """Sorted distinct values of ``label`` over samples whose name starts with ``prefix``."""
        return sorted(
            {v for (n, lab) in self.samples if n.startswith(prefix) for k, v in lab if k == label}
        )

    def histogram(self, name: str, match: Mapping[str, str] | None = None) -> HistogramDelta | None:
        """Histogram family ``name`` summed over matching label sets; None when absent."""
        counts = self.series(f"{name}_count", match)
        if not counts:
            return None
        by_le: dict[float, float] = {}
        for lab, v in self.series(f"{name}_bucket", match).items():
            le = float(dict(lab).get("le", "nan"))
            if not math.isnan(le):
                by_le[le] = by_le.get(le, 0.0) + v
        total = self.value(f"{name}_sum", match)
        return HistogramDelta(
            name, total or 0.0, math.fsum(counts.values()), tuple(sorted(by_le.items()))
        )


@dataclass(frozen=True)
class MetricsSnapshot(SampleView):
    """One scrape: samples plus when it was taken (``time.monotonic_ns()``) and from where.

    >>> parse("vllm:num_requests_waiting 2\\n", taken_ns=0).taken_ns
    0
    """

    taken_ns: int = 0
    source: str = "<text>"
    scrape_s: float | None = None  # how long the HTTP round trip took


@dataclass(frozen=True)
class MetricsDelta(SampleView):
    """``after − before`` for counters and histograms, ``after`` for gauges.

    >>> before = parse("c_total 1\\n", taken_ns=0)
    >>> after = parse("c_total 4\\n", taken_ns=2_000_000_000)
    >>> delta(before, after).elapsed_s
    2.0
    """

    elapsed_s: float = 0.0
    resets: tuple[str, ...] = ()  # series that went down (server restart between scrapes)
    notes: tuple[str, ...] = field(default_factory=tuple)


def parse(text: str, *, source: str = "<text>", taken_ns: int | None = None) -> MetricsSnapshot:
    """Parse Prometheus text exposition into a snapshot.

    >>> parse('# TYPE q counter\\nq_total{m="a"} 3\\n').value("q_total")
    3.0
    """
    samples: dict[SampleKey, float] = {}
    families: dict[str, str] = {}
    sample_family: dict[str, str] = {}
    try:
        for fam in text_string_to_metric_families(text):
            families[fam.name] = fam.type
            for s in fam.samples:
                samples[(s.name, frozenset(s.labels.items()))] = float(s.value)
                sample_family[s.name] = fam.name
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MetricsError(
            f"cannot parse the metrics from {source}: {_locate(text, exc)}",
            hint="point api.metrics_url at the server's Prometheus /metrics endpoint",
        ) from None
    _adopt_bare_totals(families, sample_family)
    stamp = time.monotonic_ns() if taken_ns is None else taken_ns
    return MetricsSnapshot(samples, families, sample_family, taken_ns=stamp, source=source)


def _adopt_bare_totals(families: dict[str, str], sample_family: dict[str, str]) -> None:
    """``# TYPE c counter`` followed by ``c_total`` samples: the parser leaves ``c_total``
    untyped; hand-written and some third-party expositions look like this, so adopt them."""
    for sample, fam in list(sample_family.items()):
        base = sample.removesuffix("_total")
        if (
            fam == sample
            and base != sample
            and families.get(fam) in ("unknown", "untyped")
            and families.get(base) == "counter"
        ):
            sample_family[sample] = base
            del families[fam]


def _locate(text: str, exc: Exception) -> str:
    """Name the first line that fails on its own; the parser itself reports no line numbers."""
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except (ValueError, TypeError, IndexError, KeyError) as line_exc:
            shown = line if len(line) <= 120 else line[:117] + "..."
            return f"line {no}: {shown!r} ({line_exc})"
    return str(exc)


def _monotonic_family(snap: SampleView, sample: str) -> str | None:
    """The family whose ever-growing series ``sample`` belongs to, or None for gauge-like."""
    fam = snap.sample_family.get(sample)
    if fam is None:
        return None
    suffixes = _MONOTONIC_SUFFIXES.get(snap.families.get(fam, ""), ())
    return fam if any(sample == fam + s for s in suffixes) else None


def _group(fam: str, labels: Labels) -> tuple[str, Labels]:
    return fam, frozenset((k, v) for k, v in labels if k not in ("le", "quantile"))


def _created(snap: SampleView, fam: str, labels: Labels) -> float | None:
    # prometheus_client writes X_created either inside family X or as its own gauge family.
    return snap.samples.get((f"{fam}_created", labels))


def _reset_groups(before: MetricsSnapshot, after: MetricsSnapshot) -> set[tuple[str, Labels]]:
    """Series groups (histogram = all its buckets) that went down or were re-created."""
    reset: set[tuple[str, Labels]] = set()
    for (name, lab), v in after.samples.items():
        fam = _monotonic_family(after, name)
        if fam is None:
            continue
        grp = _group(fam, lab)
        old = before.samples.get((name, lab))
        c_old, c_new = _created(before, *grp), _created(after, *grp)
        if (old is not None and v < old) or (c_old is not None and c_new not in (None, c_old)):
            reset.add(grp)
    return reset


def _series_id(grp: tuple[str, Labels]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(grp[1]))
    return f"{grp[0]}{{{inner}}}"


def delta(before: MetricsSnapshot, after: MetricsSnapshot) -> MetricsDelta:
    """``after − before`` for counters/histograms (restarts detected), gauges as in ``after``.

    >>> a = parse('# TYPE c counter\\nc_total 5\\n# TYPE g gauge\\ng 2\\n', taken_ns=0)
    >>> b = parse('# TYPE c counter\\nc_total 7\\n# TYPE g gauge\\ng 1\\n', taken_ns=10**9)
    >>> d = delta(a, b); (d.value("c_total"), d.value("g"), d.elapsed_s)
    (2.0, 1.0, 1.0)
    """
    if after.taken_ns < before.taken_ns:
        raise ValueError("delta(before, after): 'after' was taken before 'before'; swap them")
    resets = _reset_groups(before, after)
    values: dict[SampleKey, float] = {}
    for key, v in after.samples.items():
        fam = _monotonic_family(after, key[0])
        if fam is None or _group(fam, key[1]) in resets:
            values[key] = v
        else:
            values[key] = v - before.samples.get(key, 0.0)
    notes = _delta_notes(before, after, resets)
    return MetricsDelta(
        values,
        dict(after.families),
        dict(after.sample_family),
        elapsed_s=(after.taken_ns - before.taken_ns) / 1e9,
        resets=tuple(sorted(_series_id(g) for g in resets)),
        notes=notes,
    )


def _delta_notes(
    before: MetricsSnapshot, after: MetricsSnapshot, resets: Iterable[tuple[str, Labels]]
) -> tuple[str, ...]:
    notes: list[str] = []
    ids = sorted(_series_id(g) for g in resets)
    if ids:
        example = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
        notes.append(
            f"{len(ids)} counter/histogram series went down between the scrapes "
            f"({example}): the server restarted; their values since the restart are "
            "used as the delta, so they do not cover the whole window"
        )
    gone = [k for k in before.samples if k not in after.samples]
    if gone:
        notes.append(
            f"{len(gone)} series present in the first scrape are missing from the "
            f"second (e.g. {gone[0][0]}): the server restarted or changed its labels"
        )
    return tuple(notes)


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """Estimate the ``q``-quantile from cumulative ``(le, count)`` buckets, as Prometheus does.

    Linear interpolation inside the bucket holding rank ``q·total``; the first bucket starts at
    0 (observations are assumed non-negative); ranks in the ``+Inf`` bucket give the highest
    finite bound. None when there are no observations, no ``+Inf`` bucket or no finite bucket.

    >>> histogram_quantile([(1.0, 2), (2.0, 4), (math.inf, 4)], 0.75)
    1.5
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {q}")
    ordered = sorted((float(le), float(c)) for le, c in buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    fixed: list[tuple[float, float]] = []
    for le, c in ordered:  # float noise can make cumulative counts dip; Prometheus smooths too
        fixed.append((le, max(c, fixed[-1][1]) if fixed else c))
    total = fixed[-1][1]
    if total <= 0:
        return None
    rank = q * total
    b = next(i for i, (_, c) in enumerate(fixed) if c >= rank and c > 0)
    if b == len(fixed) - 1:
        return fixed[-2][0]
    upper, count = fixed[b]
    if b == 0 and upper <= 0:
        return upper
    lower, below = (0.0, 0.0) if b == 0 else fixed[b - 1]
    return lower + (upper - lower) * ((rank - below) / (count - below))


def histogram_quantiles(
    view: SampleView, name: str, qs: Iterable[float], *, match: Mapping[str, str] | None = None
) -> dict[float, float | None]:
    """Quantiles of histogram ``name`` in a snapshot or delta window; None where unknown.

    >>> histogram_quantiles(parse('# TYPE t histogram\\nt_bucket{le="2.0"} 4\\n'
    ...     't_bucket{le="+Inf"} 4\\nt_sum 3\\nt_count 4\\n'), "t", [0.5])
    {0.5: 1.0}
    """
    hist = view.histogram(name, match)
    return {q: (hist.quantile(q) if hist else None) for q in qs}
