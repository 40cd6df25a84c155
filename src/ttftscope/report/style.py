"""How the report's figures look: one colour per series in every plot, legends that never sit
on an axis title, runs told apart by marker and dash rather than by a repeated run id; and
what every figure of one page shares (:class:`Page`: its runs, series and colours).

A series keeps its colour across the page (``chat`` is the same blue in the CDF, the
timelines and the scatter): the variants and targets ttftscope sends are fixed, any other
name (a bench target called ``prod``) takes the next free colour in the order the page meets
it. Runs are told apart by marker symbol and line dash, and named once, as the title of
their legend group or subplot.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ttftscope.results.parts import Series, split_series
from ttftscope.results.runs import Run

# Okabe–Ito: told apart with the common colour-vision deficiencies, none of them a part's colour
SERIES_COLOURS = {
    "chat": "#0072b2",
    "text": "#d55e00",
    "ids": "#009e73",
    "direct": "#cc79a7",
    "gateway": "#e69f00",
}
_MORE = ("#56b4e9", "#7f3c8d", "#3c8d2f", "#a0522d", "#4d4d4d", "#b8860b", "#1b9e77", "#e7298a")
PART_COLOURS = {
    "client_tokenize": "#8c6bb1",
    "outside_server": "#9e9e9e",
    "server_frontend": "#e6550d",
    "queue": "#d62728",
    "prefill": "#3182bd",
}
RUN_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")
RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"
HEIGHT = 400


class Palette:
    """A colour per series name, the same in every figure of one page.

    >>> p = Palette(["prod", "chat", "staging"])
    >>> p.colour("chat"), p.colour("prod") != p.colour("staging")
    ('#0072b2', True)
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._colours = dict(SERIES_COLOURS)
        taken = 0
        for name in names:
            if name not in self._colours:
                self._colours[name] = _MORE[taken % len(_MORE)]
                taken += 1

    def colour(self, name: str) -> str:
        """The series' colour (a name the page did not list gets a neutral grey)."""
        return self._colours.get(name, "#6e7781")


def run_symbol(index: int) -> str:
    """The marker of the ``index``-th run of the page."""
    return RUN_SYMBOLS[index % len(RUN_SYMBOLS)]


def run_dash(index: int) -> str:
    """The line dash of the ``index``-th run of the page."""
    return RUN_DASHES[index % len(RUN_DASHES)]


def plain(text: str) -> str:
    """``text`` shown as written: plotly reads a subset of HTML in names and labels.

    >>> plain("<b>x</b>")
    '&lt;b&gt;x&lt;/b&gt;'
    """
    return html.escape(text, quote=False)


_LEGENDS: dict[str, dict[str, Any]] = {
    "top": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "xanchor": "left"},
    "right": {"orientation": "v", "yanchor": "top", "y": 1, "x": 1.02, "xanchor": "left"},
}


def layout(fig: Any, *, x: str, y: str, legend: str = "top", **axes: Any) -> Any:
    """The page's look. The legend sits above the plot or beside it, never below it, where
    it would meet the x axis's title."""
    fig.update_layout(
        template="plotly_white",
        height=HEIGHT,
        margin={"l": 64, "r": 20, "t": 24, "b": 56},
        font={"family": FONT, "size": 13},
        legend={
            **_LEGENDS[legend],
            "font": {"size": 12},
            "groupclick": "toggleitem",  # a click hides one series, not the run's group
        },
        **axes,
    )
    if x:
        fig.update_xaxes(title_text=x, automargin=True)
    if y:
        fig.update_yaxes(title_text=y, automargin=True)
    return fig


def empty(fig: Any, why: str) -> Any:
    """A figure without data says what was missing, so the page keeps its shape."""
    if not fig.data:
        fig.add_annotation(text=why, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


@dataclass(frozen=True)
class Page:
    """What every figure of one page shares: its runs, their series and the series' colours."""

    runs: tuple[Run, ...]
    series: tuple[Series, ...]
    palette: Palette

    @property
    def many(self) -> bool:
        """Whether the page shows several runs (then each is named once, not per label)."""
        return len(self.runs) > 1

    def marks(self, run: Run) -> dict[str, Any]:
        """A run's legend group (titled with its label once) when the page has several."""
        if not self.many:
            return {}
        return {"legendgroup": run.key, "legendgrouptitle_text": plain(run.label)}

    def index(self, run: Run) -> int:
        """The run's position on the page (its marker and dash)."""
        return next((i for i, r in enumerate(self.runs) if r.key == run.key), 0)


def page_of(runs: Sequence[Run]) -> Page:
    """The runs, their series, and a colour for every series name, in reading order.

    >>> page_of([]).many
    False
    """
    series = tuple(s for run in runs for s in split_series(run))
    return Page(tuple(runs), series, Palette(dict.fromkeys(s.name for s in series)))
