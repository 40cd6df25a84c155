"""The TTFT distribution: a CDF per series, a handful of curves at a glance.

One curve per series at its run's largest context is drawn; a probe's other context sizes
are in the figure too, shown by a plotly menu above the plot (no script of our own), so the
legend never lists more than the page can read. A bench target is one curve over its whole
run. A log axis, when the TTFTs span more than 20x, is written in whole milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# plotly ships no type information
import plotly.graph_objects as go  # type: ignore[import-untyped, unused-ignore]

from ttftscope.report.style import Page, empty, layout, plain, run_dash, run_symbol
from ttftscope.results.parts import Buckets, Series

__all__ = ["ttft_cdf"]


@dataclass(frozen=True)
class _Curve:
    series: Series
    key: int | None  # a probe's context bucket; None: a bench's whole run
    size: str
    ttfts: list[float]

    @property
    def name(self) -> str:
        return plain(self.series.name + (f", {self.size}" if self.key is not None else ""))


def _curves(page: Page) -> list[_Curve]:
    out = []
    for s in page.series:
        buckets = Buckets.for_records(s.records)
        keys = sorted({buckets.key(r) for r in s.records}) if s.run.kind == "probe" else [None]
        for key in keys:
            mine = [r for r in s.records if key is None or buckets.key(r) == key]
            ttfts = sorted(r.client_ttft_ms for r in mine if r.client_ttft_ms is not None)
            if ttfts:
                size = buckets.label(key) if key is not None else ""
                out.append(_Curve(s, key, size, ttfts))
    return out


def _views(curves: Sequence[_Curve]) -> list[tuple[str, list[bool]]]:
    """(button label, which curves show): each run's largest context first, then each size,
    then every curve; a page with one context size needs no buttons."""
    top: dict[str, int] = {}
    for c in curves:
        if c.key is not None:
            top[c.series.run.key] = max(c.key, top.get(c.series.run.key, c.key))
    sizes = sorted({(c.key, c.size) for c in curves if c.key is not None})
    largest = [c.key is None or c.key == top[c.series.run.key] for c in curves]
    if len(sizes) < 2:
        return [("", largest)]
    common = len(set(top.values())) == 1
    first = f"{sizes[-1][1]} (largest)" if common else "each run's largest context"
    views = [(first, largest)]
    for key, label in sizes[:-1] if common else sizes:
        views.append((label, [c.key is None or c.key == key for c in curves]))
    views.append(("every context size", [True] * len(curves)))
    return views


def _log_axis(low: float, high: float) -> dict[str, Any]:
    """A log axis whose ticks are whole milliseconds (1, 2, 3, 5 × 10ⁿ), each written out:
    plotly's own minor labels ("3" for 300) read as the wrong number.

    >>> _log_axis(30, 4000)["ticktext"]
    ['20', '30', '50', '100', '200', '300', '500', '1,000', '2,000', '3,000', '5,000']
    """
    ticks = [
        m * 10**e
        for e in range(math.floor(math.log10(max(low, 1e-3))) - 1, math.ceil(math.log10(high)) + 1)
        for m in (1, 2, 3, 5)
    ]
    ticks = [t for t in ticks if low / 2 <= t <= high * 2]
    return {"type": "log", "tickvals": ticks, "ticktext": [f"{t:,.6g}" for t in ticks]}


def _menu(views: Sequence[tuple[str, list[bool]]]) -> dict[str, Any]:
    """The context-size menu, above the plot on the left (the legend is on the right)."""
    return {
        "type": "dropdown",
        "buttons": [
            {"label": label, "method": "restyle", "args": [{"visible": shown}]}
            for label, shown in views
        ],
        "active": 0,
        "x": 0,
        "xanchor": "left",
        "y": 1.02,
        "yanchor": "bottom",
        "bgcolor": "#ffffff",
        "bordercolor": "#d0d7de",
        "font": {"size": 12},
        "pad": {"l": 0, "t": 0, "b": 0, "r": 0},
    }


def ttft_cdf(page: Page) -> Any:
    """Share of requests at or under each TTFT: one curve per series at its run's largest
    context (a probe's other sizes one click away), a bench's target over its whole run.

    >>> from ttftscope.report.style import page_of
    >>> ttft_cdf(page_of([])).layout.yaxis.tickformat
    '.0%'
    """
    fig = go.Figure()
    curves = _curves(page)
    views = _views(curves)
    for c, shown in zip(curves, views[0][1], strict=True):
        run = page.index(c.series.run)
        colour = page.palette.colour(c.series.name)
        fig.add_trace(
            go.Scatter(
                x=c.ttfts,
                y=[(i + 1) / len(c.ttfts) for i in range(len(c.ttfts))],
                name=c.name,
                mode="lines+markers",
                line={"shape": "hv", "color": colour, "dash": run_dash(run)},
                marker={"symbol": run_symbol(run), "size": 6, "color": colour},
                visible=shown,
                **page.marks(c.series.run),
            )
        )
    values = [v for c in curves for v in c.ttfts]
    wide = bool(values) and max(values) > 20 * max(min(values), 1e-3)
    fig = layout(
        fig,
        x="TTFT (ms, client)",
        y="requests at or under",
        yaxis={"tickformat": ".0%", "range": [0, 1.02]},
        xaxis=_log_axis(min(values), max(values)) if wide else {"type": "linear"},
        legend="right",
    )
    if len(views) > 1:
        fig.update_layout(updatemenus=[_menu(views)], margin_t=48)
    return empty(fig, "no successful request to plot")
