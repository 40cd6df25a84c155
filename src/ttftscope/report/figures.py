"""The report's plots (plotly figures): TTFT CDFs, parts by context size, timelines, scatter.

Every figure is built from the same series and breakdowns (``results.parts``) the doctor's rules
judge, so a plot and a finding never disagree. A figure without data still renders, with a note
saying what was missing, so the page keeps its shape for any result directory.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# plotly ships no type information; these two names are all the report uses of it
import plotly.graph_objects as go  # type: ignore[import-untyped, unused-ignore]

from ttftscope.report.timeline import Timeline, hit_rate_timelines, queue_timelines
from ttftscope.results.parts import (
    PART_LABELS,
    PARTS,
    Breakdown,
    Buckets,
    Series,
    part_ms,
    records_breakdown,
    split_series,
    summary_breakdown,
)
from ttftscope.results.runs import Run

PART_COLOURS = {
    "client_tokenize": "#8c6bb1",
    "outside_server": "#9e9e9e",
    "server_frontend": "#e6550d",
    "queue": "#d62728",
    "prefill": "#3182bd",
}
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"
_HEIGHT = 400


@dataclass(frozen=True)
class Plot:
    """One figure of the report: an HTML id, a title, how to read it, and the figure."""

    key: str
    title: str
    caption: str
    figure: Any  # plotly.graph_objects.Figure (untyped)
    wide: bool = False  # spans the page's width


def _layout(fig: Any, *, x: str, y: str, **axes: Any) -> Any:
    fig.update_layout(
        template="plotly_white",
        height=_HEIGHT,
        margin={"l": 60, "r": 20, "t": 30, "b": 60},
        font={"family": FONT, "size": 13},
        legend={"orientation": "h", "yanchor": "top", "y": -0.24, "x": 0},
        xaxis_title=x,
        yaxis_title=y,
        **axes,
    )
    return fig


def _empty(fig: Any, why: str) -> Any:
    if not fig.data:
        fig.add_annotation(text=why, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def _plain(text: str) -> str:
    """``text`` shown as written: plotly reads a subset of HTML in names and labels."""
    return html.escape(text, quote=False)


def _series_label(series: Series, many_runs: bool) -> str:
    """The legend's name (the run's too when a report shows several), shown as written."""
    return _plain(series.label if many_runs else series.name)


def ttft_cdf(series: Sequence[Series], many_runs: bool) -> Any:
    """Share of requests at or under each TTFT, per series (a probe's per context size).

    >>> ttft_cdf([], False).layout.yaxis.tickformat
    '.0%'
    """
    fig = go.Figure()
    values_seen: list[float] = []
    for s in series:
        buckets = Buckets.for_records(s.records)
        keys = sorted({buckets.key(r) for r in s.records}) if s.run.kind == "probe" else [None]
        for key in keys:
            ttfts = sorted(
                r.client_ttft_ms
                for r in s.records
                if r.client_ttft_ms is not None and (key is None or buckets.key(r) == key)
            )
            if not ttfts:
                continue
            values_seen.extend(ttfts)
            name = _series_label(s, many_runs)
            if key is not None and len(keys) > 1:
                name = f"{name}, {buckets.label(key)}"
            y = [(i + 1) / len(ttfts) for i in range(len(ttfts))]
            fig.add_trace(
                go.Scatter(x=ttfts, y=y, name=name, mode="lines+markers", line_shape="hv")
            )
    wide = bool(values_seen) and max(values_seen) > 20 * max(min(values_seen), 1e-3)
    fig = _layout(
        fig,
        x="TTFT (ms, client)",
        y="requests at or under",
        yaxis={"tickformat": ".0%", "range": [0, 1.02]},
        xaxis={"type": "log" if wide else "linear"},
    )
    return _empty(fig, "no successful request to plot")


def _bar_rows(series: Sequence[Series], many_runs: bool) -> list[tuple[str, str, Breakdown]]:
    """(context bucket, series label, breakdown) per bar, smallest contexts first."""
    rows: list[tuple[int, int, str, str, Breakdown]] = []
    for order, s in enumerate(series):
        label = _series_label(s, many_runs)
        buckets = Buckets.for_records(s.records, s.run.kind)
        before = len(rows)
        for key in sorted({buckets.key(r) for r in s.records}):
            found = records_breakdown([r for r in s.records if buckets.key(r) == key])
            if found is not None:
                rows.append((key, order, buckets.label(key), label, found))
        if len(rows) == before and s.run.kind == "bench":
            whole = summary_breakdown(s.run.bench_summaries)  # run-wide histogram aggregates
            if whole is not None:
                rows.append((1 << 62, order, "whole run (server histograms)", label, whole))
    rows.sort(key=lambda row: row[:2])
    return [(bucket, label, found) for _, _, bucket, label, found in rows]


def parts_bars(series: Sequence[Series], many_runs: bool) -> Any:
    """Stacked medians of the parts per context size and series, with the median TTFT.

    Several runs' long labels read better down the side: the bars then lie horizontally.

    >>> len(parts_bars([], False).data)
    0
    """
    rows = _bar_rows(series, many_runs)
    cats = [[b for b, _, _ in rows], [s for _, s, _ in rows]]
    flat = not many_runs

    def xy(values: list[float | None]) -> dict[str, Any]:
        return {"x": cats, "y": values} if flat else {"x": values, "y": cats}

    fig = go.Figure()
    for part in PARTS:
        values = [found.part(part) for _, _, found in rows]
        if any(v is not None for v in values):
            fig.add_trace(
                go.Bar(
                    **xy(values),
                    orientation="v" if flat else "h",
                    name=PART_LABELS[part],
                    marker_color=PART_COLOURS[part],
                )
            )
    if rows:
        mark = "line-ew-open" if flat else "line-ns-open"
        fig.add_trace(
            go.Scatter(
                **xy([found.ttft_ms for _, _, found in rows]),
                name="TTFT (median)",
                mode="markers",
                marker={"symbol": mark, "size": 24, "color": "black", "line": {"width": 2}},
            )
        )
    axis = "ms (medians, part by part)"
    fig = _layout(
        fig,
        x="" if flat else axis,
        y=axis if flat else "",
        barmode="stack",
        legend_traceorder="normal",
    )
    if not flat:
        fig.update_layout(height=max(_HEIGHT, 150 + 26 * len(rows)), yaxis_autorange="reversed")
    return _empty(fig, "no request with the server's breakdown")


def _timeline_figure(
    runs: Sequence[Run], lines_of: Callable[[Run], list[Timeline]], y: str, **axes: Any
) -> Any:
    fig = go.Figure()
    sources = set()
    for run in runs:
        for line in lines_of(run):
            sources.add(line.source)
            name = _plain(line.name if len(runs) == 1 else f"{run.label} · {line.name}")
            # records are points in time, not a sampled level: no line between them
            mode = "lines" if line.source == "samples" else "markers"
            fig.add_trace(go.Scatter(x=line.t, y=line.values, name=name, mode=mode))
    where = " and ".join(sorted(sources)) or "nothing"
    fig = _layout(fig, x=f"seconds since the run's start (from {where})", y=y, **axes)
    return _empty(fig, "no timed samples or records")


def queue_figure(runs: Sequence[Run]) -> Any:
    """Requests waiting in the server's queue over time.

    >>> queue_figure([]).layout.yaxis.title.text
    'requests waiting'
    """
    return _timeline_figure(
        runs, queue_timelines, "requests waiting", yaxis={"rangemode": "tozero"}
    )


def hit_rate_figure(runs: Sequence[Run]) -> Any:
    """Prefix-cache hit rate over time.

    >>> hit_rate_figure([]).layout.yaxis.tickformat
    '.0%'
    """
    axes = {"yaxis": {"tickformat": ".0%", "range": [0, 1.02]}}
    return _timeline_figure(runs, hit_rate_timelines, "prefix hit rate", **axes)


def tokenization_scatter(series: Sequence[Series], many_runs: bool) -> Any:
    """Per request: tokenization's share of TTFT (front end + client) against hit rate.

    >>> tokenization_scatter([], False).layout.xaxis.title.text
    'prefix hit rate'
    """
    fig = go.Figure()
    for s in series:
        points = []
        for r in s.records:
            front = part_ms(r, "server_frontend")
            if front is None or r.prefix_hit_rate is None or not r.client_ttft_ms:
                continue
            share = (max(front, 0.0) + (r.tokenize_ms or 0.0)) / r.client_ttft_ms
            points.append((r.prefix_hit_rate, share, r.context_tokens_target))
        if points:
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    text=[f"{p[2]:,} tokens" for p in points],
                    name=_series_label(s, many_runs),
                    mode="markers",
                    marker={"size": 9, "opacity": 0.75},
                )
            )
    fig = _layout(
        fig,
        x="prefix hit rate",
        y="tokenization share of TTFT",
        xaxis={"range": [-0.02, 1.02], "tickformat": ".0%"},
        yaxis={"tickformat": ".0%", "rangemode": "tozero"},
    )
    return _empty(fig, "no request with both a hit rate and the server's front end")


# (key, title, how to read it) of each plot, in reading order
_PLOTS: tuple[tuple[str, str, str], ...] = (
    (
        "ttft-cdf",
        "TTFT distribution",
        "Share of requests whose time to first token is at or under x. A curve to the left is "
        "faster; a long flat tail is the P99 users feel.",
    ),
    (
        "ttft-parts",
        "Where TTFT goes, by context size",
        "Medians part by part (they need not add up to the median TTFT, the black mark). "
        "Front end = server TTFT − queue − prefill (chat rendering, tokenization); outside "
        "the server = serialization, network, HTTP.",
    ),
    (
        "queue",
        "Queue depth over time",
        "Requests waiting for the engine. Above zero for long means the server is saturated: "
        "queueing, not tokenization, is what grows TTFT.",
    ),
    (
        "hit-rate",
        "Prefix-cache hit rate over time",
        "Share of prompt tokens found in the prefix cache. Agents' growing contexts should "
        "stay near 100% once warm.",
    ),
    (
        "tokenization",
        "Tokenization share of TTFT against hit rate",
        "Per request: (server front end + client tokenization) / TTFT. The better the cache, "
        "the less prefill is left, and the more re-tokenizing the prompt dominates.",
    ),
)


def report_plots(runs: Sequence[Run]) -> list[Plot]:
    """Every plot of the report, in reading order.

    >>> [p.key for p in report_plots([])]
    ['ttft-cdf', 'ttft-parts', 'queue', 'hit-rate', 'tokenization']
    """
    series = [s for run in runs for s in split_series(run)]
    many = len(runs) > 1
    figures = (
        ttft_cdf(series, many),
        parts_bars(series, many),
        queue_figure(runs),
        hit_rate_figure(runs),
        tokenization_scatter(series, many),
    )
    return [
        Plot(key, title, caption, figure, wide=many and key == "ttft-parts")
        for (key, title, caption), figure in zip(_PLOTS, figures, strict=True)
    ]
