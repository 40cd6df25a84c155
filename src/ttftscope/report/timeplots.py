"""Queue depth and prefix hit rate over time as figures: each run on its own axis.

Two runs share no clock and no scale: on one axis a queue spike of one run is a hairline
beside the other's minutes. Each run gets its own row (titled with its label once) and its
own y axis; a series keeps the page's colour and is named once in the legend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped, unused-ignore]
from plotly.subplots import make_subplots  # type: ignore[import-untyped, unused-ignore]

from ttftscope.report.style import HEIGHT, Palette, empty, layout, plain
from ttftscope.report.timeline import Timeline, hit_rate_timelines, queue_timelines
from ttftscope.results.runs import Run

__all__ = ["hit_rate_figure", "queue_figure"]

_ROW_PX = 190  # height of one run's row when several are stacked


def _frame(runs: Sequence[Run]) -> tuple[int, Any]:
    """The figure's height and the figure: a row per run when there are several."""
    if len(runs) < 2:
        return HEIGHT, go.Figure()
    height = 110 + _ROW_PX * len(runs)
    fig = make_subplots(
        rows=len(runs),
        cols=1,
        vertical_spacing=min(64 / height, 0.3 / len(runs)),
        subplot_titles=[plain(run.label) for run in runs],
    )
    return height, fig


def _figure(
    runs: Sequence[Run],
    lines_of: Callable[[Run], list[Timeline]],
    y: str,
    palette: Palette,
    yaxis: dict[str, Any],
) -> Any:
    rows = [(run, lines) for run in runs if (lines := lines_of(run))]
    stacked = len(rows) > 1
    height, fig = _frame([run for run, _ in rows])
    named: set[str] = set()
    sources: set[str] = set()
    for i, (_, lines) in enumerate(rows, start=1):
        for line in lines:
            sources.add(line.source)
            colour = palette.colour(line.name)
            # records are points in time, not a sampled level: no line between them
            mode = "lines" if line.source == "samples" else "markers"
            trace = go.Scatter(
                x=line.t,
                y=line.values,
                name=plain(line.name),
                mode=mode,
                legendgroup=line.name,
                showlegend=line.name not in named,
                line={"color": colour, "width": 2},
                marker={"color": colour, "size": 6},
            )
            named.add(line.name)
            fig.add_trace(trace, row=i, col=1) if stacked else fig.add_trace(trace)
    where = " and ".join(sorted(sources)) or "nothing"
    x = f"seconds since the run's start (from {where})"
    fig = layout(fig, x="" if stacked else x, y="" if stacked else y, legend="right")
    fig.update_layout(height=height)
    fig.update_yaxes(**yaxis)
    if stacked:
        fig.update_xaxes(title_text=x, row=len(rows), col=1)
        fig.update_yaxes(title_text=y, title_font_size=12)
        fig.update_annotations(font_size=13, x=0, xanchor="left")
    return empty(fig, "no timed samples or records")


def queue_figure(runs: Sequence[Run], palette: Palette | None = None) -> Any:
    """Requests waiting in the server's queue over time.

    >>> queue_figure([]).layout.yaxis.title.text
    'requests waiting'
    """
    axes = {"rangemode": "tozero"}
    return _figure(runs, queue_timelines, "requests waiting", palette or Palette(()), axes)


def hit_rate_figure(runs: Sequence[Run], palette: Palette | None = None) -> Any:
    """Prefix-cache hit rate over time.

    >>> hit_rate_figure([]).layout.yaxis.tickformat
    '.0%'
    """
    axes = {"tickformat": ".0%", "range": [0, 1.02]}
    return _figure(runs, hit_rate_timelines, "prefix hit rate", palette or Palette(()), axes)
