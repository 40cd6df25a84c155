"""Prometheus text exposition: parse, snapshot and delta.

Scraping over HTTP is :mod:`.scrape`'s, histogram maths :mod:`.histogram`'s and the guards
around the third-party parser :mod:`.exposition`'s.

A probe scrapes ``/metrics`` right before and right after one request; the difference of the
two snapshots is that request's server-side story (histogram ``_sum`` deltas are its exact
values when nothing else ran). Names are kept as they appear in the exposition: counters end in
``_total``, histograms expose ``_bucket{le=..}``, ``_sum`` and ``_count``.

>>> before = parse_metrics('# TYPE t histogram\\nt_bucket{le="1.0"} 0\\nt_bucket{le="+Inf"} 0\\n'
...                't_sum 0\\nt_count 0\\n')
>>> after = parse_metrics('# TYPE t histogram\\nt_bucket{le="1.0"} 1\\nt_bucket{le="+Inf"} 1\\n'
...               't_sum 0.25\\nt_count 1\\n')
>>> h = metrics_delta(before, after).histogram("t")
>>> (h.count, h.sum, h.quantile(0.5))
(1.0, 0.25, 0.5)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from ttftscope.metrics.exposition import read_families
from ttftscope.metrics.histogram import HistogramDelta, histogram_of, sum_values

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
        return sum_values(found.values()) if found else None

    def has(self, name: str) -> bool:
        """True when ``name`` is a family or sample name present in the exposition."""
        return name in self.families or name in self.sample_family

    def label_values(self, label: str, prefix: str = "") -> list[str]:
        """Sorted distinct values of ``label`` over samples whose name starts with ``prefix``."""
        return sorted(
            {v for (n, lab) in self.samples if n.startswith(prefix) for k, v in lab if k == label}
        )

    def histogram(self, name: str, match: Mapping[str, str] | None = None) -> HistogramDelta | None:
        """Histogram family ``name`` summed over matching label sets; None when absent.

        Bucket series whose ``le`` is not a number are skipped and named in its ``notes``.
        """
        counts = self.series(f"{name}_count", match)
        if not counts:
            return None
        buckets = self.series(f"{name}_bucket", match)
        return histogram_of(name, counts.values(), buckets, self.value(f"{name}_sum", match))


@dataclass(frozen=True)
class MetricsSnapshot(SampleView):
    """One scrape: samples plus when it was taken (``time.monotonic_ns()``) and from where.

    >>> parse_metrics("vllm:num_requests_waiting 2\\n", taken_ns=0).taken_ns
    0
    """

    taken_ns: int = 0
    source: str = "<text>"
    scrape_s: float | None = None  # how long the HTTP round trip took
    notes: tuple[str, ...] = ()  # what was odd in the exposition (duplicates, type clashes)


@dataclass(frozen=True)
class MetricsDelta(SampleView):
    """``after − before`` for counters and histograms, ``after`` for gauges.

    >>> before = parse_metrics("c_total 1\\n", taken_ns=0)
    >>> after = parse_metrics("c_total 4\\n", taken_ns=2_000_000_000)
    >>> metrics_delta(before, after).elapsed_s
    2.0
    """

    elapsed_s: float = 0.0
    resets: tuple[str, ...] = ()  # series that went down (server restart between scrapes)
    notes: tuple[str, ...] = field(default_factory=tuple)  # both snapshots' notes, then ours


def parse_metrics(
    text: str, *, source: str = "<text>", taken_ns: int | None = None
) -> MetricsSnapshot:
    """Parse Prometheus text exposition into a snapshot; MetricsError naming the bad line.

    Values are kept as sent, NaN and ±Inf included (callers decide what they mean); a value
    beyond the float range (``1e999``, 309+ digits) is refused, as Prometheus refuses it. A
    series that appears twice keeps its first value (Prometheus drops the later ones too); a
    family whose ``# TYPE`` lines disagree with each other or with its samples still gets one
    type (a declared one over the parser's "unknown"). Both become ``notes``. Size caps, line
    ends, the BOM and the other guards: :mod:`ttftscope.metrics.exposition`.

    >>> from ttftscope import parse_metrics
    >>> parse_metrics('# TYPE q counter\\nq_total{m="a"} 3\\n').value("q_total")
    3.0
    >>> twice = parse_metrics("g 1\\ng 2\\n"); twice.value("g"), twice.notes[0][:38]
    (1.0, '1 series appear more than once (e.g. g')
    """
    samples, families, sample_family, notes = _collect(*read_families(text, source))
    _adopt_bare_totals(families, sample_family)
    stamp = time.monotonic_ns() if taken_ns is None else taken_ns
    return MetricsSnapshot(
        samples, families, sample_family, taken_ns=stamp, source=source, notes=notes
    )


def _number(value: float) -> float:
    try:
        return float(value)
    except OverflowError:  # read_families refused such lines already; keep float() total
        return math.inf if value > 0 else -math.inf


def _collect(
    fams: list[Metric], declared: Mapping[str, list[str]]
) -> tuple[dict[SampleKey, float], dict[str, str], dict[str, str], tuple[str, ...]]:
    """Samples (first of each series wins), family types, sample -> family, and notes."""
    samples: dict[SampleKey, float] = {}
    sample_family: dict[str, str] = {}
    types_seen: dict[str, list[str]] = {}
    dups: list[SampleKey] = []
    for fam in fams:
        types_seen.setdefault(fam.name, []).append(fam.type)
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            if key in samples:
                dups.append(key)
                continue
            samples[key] = _number(s.value)
            sample_family.setdefault(s.name, fam.name)
    # An explicit # TYPE beats the "unknown" the parser gives samples that do not fit it.
    families = {
        name: next((t for t in seen if t != "unknown"), seen[0])
        for name, seen in types_seen.items()
    }
    _merge_declared(types_seen, declared)
    notes = _clash_notes(types_seen, families)
    if dups:
        notes.append(
            f"{len(dups)} series appear more than once (e.g. {_series_id(dups[0])}): the "
            "first value of each is used, as Prometheus keeps the first; the server's "
            "exposition is broken"
        )
    return samples, families, sample_family, tuple(notes)


def _merge_declared(types_seen: dict[str, list[str]], declared: Mapping[str, list[str]]) -> None:
    """Add what the # TYPE lines said: a re-declared family is one family to the parser,
    which silently keeps the last type."""
    for name, kinds in declared.items():
        fam = name if name in types_seen else name.removesuffix("_total")  # counters drop it
        if fam in types_seen:
            types_seen[fam].extend("unknown" if k == "untyped" else k for k in kinds)


def _clash_notes(types_seen: Mapping[str, list[str]], chosen: Mapping[str, str]) -> list[str]:
    clashes = sorted(n for n, seen in types_seen.items() if len(set(seen)) > 1)
    return [
        f"{name} appears as {' and '.join(dict.fromkeys(types_seen[name]))}: its # TYPE "
        f"line disagrees with its samples, or the family is split; read as {chosen[name]}"
        for name in clashes[:3]
    ] + ([f"{len(clashes) - 3} more families have the same problem"] if len(clashes) > 3 else [])


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
    # A NaN stamp never equals itself: it would flag a restart on every scrape, so ignore it.
    stamp = snap.samples.get((f"{fam}_created", labels))
    return stamp if stamp is not None and math.isfinite(stamp) else None


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
    inner = ",".join(f'{k}="{v[:40]}"' for k, v in sorted(grp[1])[:8])
    return f"{grp[0][:80]}{{{inner}}}"


def metrics_delta(before: MetricsSnapshot, after: MetricsSnapshot) -> MetricsDelta:
    """``after − before`` for counters/histograms (restarts detected), gauges as in ``after``.

    >>> from ttftscope import metrics_delta, parse_metrics
    >>> a = parse_metrics('# TYPE c counter\\nc_total 5\\n# TYPE g gauge\\ng 2\\n', taken_ns=0)
    >>> b = parse_metrics('# TYPE c counter\\nc_total 7\\n# TYPE g gauge\\ng 1\\n', taken_ns=10**9)
    >>> d = metrics_delta(a, b); (d.value("c_total"), d.value("g"), d.elapsed_s)
    (2.0, 1.0, 1.0)
    """
    if after.taken_ns < before.taken_ns:
        raise ValueError(
            "metrics_delta(before, after): 'after' was taken before 'before'; swap them"
        )
    resets = _reset_groups(before, after)
    values: dict[SampleKey, float] = {}
    for key, v in after.samples.items():
        fam = _monotonic_family(after, key[0])
        if fam is None or _group(fam, key[1]) in resets:
            values[key] = v
        else:
            values[key] = v - before.samples.get(key, 0.0)
    own = _delta_notes(before, after, resets)
    notes = tuple(dict.fromkeys((*before.notes, *after.notes, *own)))
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
