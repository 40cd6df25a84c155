"""The report's plots (plotly figures): TTFT CDFs, parts by context size, timelines, scatter,
one request's waterfall.

Every figure is built from the same series and breakdowns (``results.parts``) the doctor's rules
judge, so a plot and a finding never disagree. A figure without data still renders, with a note
saying what was missing, so the page keeps its shape for any result directory. What they look
like (a colour per series on the whole page, runs told apart by marker) is ``report.style``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# plotly ships no type information; these names are all the report uses of it
import plotly.graph_objects as go  # type: ignore[import-untyped, unused-ignore]
from plotly.subplots import make_subplots  # type: ignore[import-untyped, unused-ignore]

from ttftscope.report.cdf import ttft_cdf
from ttftscope.report.style import (
    HEIGHT,
    PART_COLOURS,
    Page,
    empty,
    layout,
    page_of,
    plain,
    run_symbol,
)
from ttftscope.report.timeplots import hit_rate_figure, queue_figure
from ttftscope.report.waterfall import waterfall_figure
from ttftscope.results.parts import (
    PART_LABELS,
    PARTS,
    Breakdown,
    Buckets,
    Series,
    part_ms,
    records_breakdown,
    split_series,
)
from ttftscope.results.runs import Run
from ttftscope.results.servers import server_figures

__all__ = ["Plot", "parts_bars", "report_plots", "tokenization_scatter"]

WHOLE_RUN = "whole run"


@dataclass(frozen=True)
class Plot:
    """One figure of the report: an HTML id, a title, how to read it, and the figure."""

    key: str
    title: str
    caption: str
    figure: Any  # plotly.graph_objects.Figure (untyped)
    wide: bool = False  # spans the page's width


@dataclass(frozen=True)
class _Bar:
    order: tuple[int, int]  # (context bucket, series) for sorting
    bucket: str
    name: str
    found: Breakdown


def _bars(run: Run, series: Sequence[Series]) -> list[_Bar]:
    """A run's bars: per context size and series; a bench without per-request parts gets
    one bar per server from its histograms, named by the targets behind it."""
    out: list[_Bar] = []
    for order, s in enumerate(series):
        buckets = Buckets.for_records(s.records, s.run.kind)
        for key in sorted({buckets.key(r) for r in s.records}):
            found = records_breakdown([r for r in s.records if buckets.key(r) == key])
            if found is not None:
                out.append(_Bar((key, order), buckets.label(key), plain(s.name), found))
    if not out and run.kind == "bench":
        for order, server in enumerate(server_figures(run)):
            if server.breakdown is not None:
                shared = " (one server)" if server.shared else ""
                others = " + other clients" if server.others >= 1 else ""
                name = plain(server.name + others + shared)
                out.append(_Bar((1 << 62, order), WHOLE_RUN, name, server.breakdown))
    return sorted(out, key=lambda b: b.order)


def _bar_traces(bars: Sequence[_Bar], flat: bool, seen: set[str], ttft: str) -> list[Any]:
    cats = [[b.bucket for b in bars], [b.name for b in bars]]

    def xy(values: list[float | None]) -> dict[str, Any]:
        return {"x": cats, "y": values} if flat else {"x": values, "y": cats}

    traces = []
    for part in PARTS:
        values = [b.found.part(part) for b in bars]
        if any(v is not None for v in values):
            traces.append(
                go.Bar(
                    **xy(values),
                    orientation="v" if flat else "h",
                    name=PART_LABELS[part],
                    legendgroup=part,
                    showlegend=part not in seen,
                    marker_color=PART_COLOURS[part],
                )
            )
            seen.add(part)
    mark = "line-ew-open" if flat else "line-ns-open"
    traces.append(
        go.Scatter(
            **xy([b.found.ttft_ms for b in bars]),
            name=ttft,
            legendgroup="ttft",
            showlegend="ttft" not in seen,
            mode="markers",
            marker={"symbol": mark, "size": 22, "color": "black", "line": {"width": 2}},
        )
    )
    seen.add("ttft")
    return traces


def parts_bars(page: Page) -> Any:
    """Stacked medians of the parts per context size and series, with the median TTFT.

    One run: upright bars. Several: a row of lying bars per run, titled with its label once,
    on one ms axis.

    >>> len(parts_bars(page_of([])).data)
    0
    """
    rows = [(run, bars) for run in page.runs if (bars := _bars(run, split_series(run)))]
    medians = all(b.found.stat == "median" for _, bars in rows for b in bars)
    axis = (
        "ms (medians, part by part)" if medians else "ms (medians part by part; whole run: means)"
    )
    ttft = "TTFT (median)" if medians else "TTFT (median; whole run: mean)"
    if page.many and len(rows) > 1:
        return _run_rows(rows, axis, ttft)
    fig = go.Figure()
    flat, seen = not page.many, set[str]()
    for _, bars in rows:
        fig.add_traces(_bar_traces(bars, flat, seen, ttft))
    fig = layout(fig, x="" if flat else axis, y=axis if flat else "", barmode="stack")
    if not flat and rows:
        fig.update_layout(height=max(HEIGHT, 150 + 26 * len(rows[0][1])))
        fig.update_yaxes(autorange="reversed")
    return empty(fig, "no request with the server's breakdown")


def _run_rows(rows: Sequence[tuple[Run, list[_Bar]]], axis: str, ttft: str) -> Any:
    """Several runs' bars: a row each, titled with the run's label once, on one ms axis."""
    counts = [len(bars) for _, bars in rows]
    height = 120 + 28 * sum(counts) + 56 * len(rows)
    fig = make_subplots(
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        row_heights=[c / sum(counts) for c in counts],
        vertical_spacing=min(56 / height, 0.3 / len(rows)),
        subplot_titles=[plain(run.label) for run, _ in rows],
    )
    seen: set[str] = set()
    for i, (_, bars) in enumerate(rows, start=1):
        fig.add_traces(_bar_traces(bars, False, seen, ttft), rows=i, cols=1)
    fig = layout(fig, x="", y="", barmode="stack", legend="right")
    fig.update_xaxes(title_text=axis, row=len(rows), col=1)
    fig.update_yaxes(autorange="reversed")
    fig.update_annotations(font_size=13, x=0, xanchor="left")
    fig.update_layout(height=height)
    return fig


def tokenization_scatter(page: Page) -> Any:
    """Per request: tokenization's share of TTFT (front end + client) against hit rate.

    >>> tokenization_scatter(page_of([])).layout.xaxis.title.text
    'prefix hit rate'
    """
    fig = go.Figure()
    for s in page.series:
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
                    name=plain(s.name),
                    mode="markers",
                    marker={
                        "size": 9,
                        "opacity": 0.75,
                        "color": page.palette.colour(s.name),
                        "symbol": run_symbol(page.index(s.run)),
                    },
                    **page.marks(s.run),
                )
            )
    fig = layout(
        fig,
        x="prefix hit rate",
        y="tokenization share of TTFT",
        xaxis={"range": [-0.02, 1.02], "tickformat": ".0%"},
        yaxis={"tickformat": ".0%", "rangemode": "tozero"},
        legend="right",
    )
    return empty(fig, "no request with both a hit rate and the server's front end")


# (key, title, how to read it) of each plot, in reading order
_PLOTS: tuple[tuple[str, str, str], ...] = (
    (
        "ttft-cdf",
        "TTFT distribution",
        "Share of requests whose time to first token is at or under x, one curve per series "
        "at the largest context (the menu shows the other sizes). A curve to the left is "
        "faster; a long flat tail is the P99 users feel.",
    ),
    (
        "ttft-parts",
        "Where TTFT goes, by context size",
        "Medians part by part (they need not add up to the median TTFT, the black mark). "
        "Front end = server TTFT − queue − prefill (chat rendering, tokenization); outside "
        "the server = serialization, network, HTTP. A bench's whole-run bars are means from each "
        "server's histograms: targets behind one server share them, so they get one bar.",
    ),
    (
        "queue",
        "Queue depth over time",
        "Requests waiting for the engine, each run on its own axis. Above zero for long means "
        "the server is saturated: queueing, not tokenization, is what grows TTFT.",
    ),
    (
        "hit-rate",
        "Prefix-cache hit rate over time",
        "Share of prompt tokens found in the prefix cache, each run on its own axis. Agents' "
        "growing contexts should stay near 100% once warm.",
    ),
    (
        "tokenization",
        "Tokenization share of TTFT against hit rate",
        "Per request: (server front end + client tokenization) / TTFT. The better the cache, "
        "the less prefill is left, and the more re-tokenizing the prompt dominates.",
    ),
    (
        "waterfall",
        "One request, bar by bar: the slowest and the median",
        "The client's phases (grey) from the record, then the trace's spans: the gateway's "
        "stages (orange) and the server's (blue), all in ms from the start of the client's "
        "work. A request without spans gets the server's parts from its record instead: "
        "front end, queue, prefill placed to end at its first token (lengths measured, "
        "position estimated).",
    ),
)


# the CDF's legend sits beside it; several runs' bars and points need the page's width too
_WIDE = ("ttft-cdf", "waterfall")
_WIDE_MANY = ("ttft-parts", "tokenization")


def report_plots(runs: Sequence[Run]) -> list[Plot]:
    """Every plot of the report, in reading order.

    >>> [p.key for p in report_plots([])]
    ['ttft-cdf', 'ttft-parts', 'queue', 'hit-rate', 'tokenization', 'waterfall']
    """
    page = page_of(runs)
    figures = (
        ttft_cdf(page),
        parts_bars(page),
        queue_figure(page.runs, page.palette),
        hit_rate_figure(page.runs, page.palette),
        tokenization_scatter(page),
        waterfall_figure(page.runs),
    )
    return [
        Plot(
            key,
            title,
            caption,
            figure,
            wide=key in _WIDE or (page.many and key in _WIDE_MANY),
        )
        for (key, title, caption), figure in zip(_PLOTS, figures, strict=True)
    ]
