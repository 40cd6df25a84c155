"""The per-request parts as a terminal table that fits 80 columns (bench and report print it).

Three rows a group: p50, p90, and how many requests had each part with where their values
came from (``12s`` twelve from spans, ``3h`` three from /metrics histograms), so a cell never
needs more than ~7 characters and the table stays readable on an 80-column terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

from ttftscope.results.request_parts import REQUEST_PARTS, RequestPart

__all__ = ["PARTS_FOOTNOTE", "parts_table", "sources_cell"]

_HEADERS: dict[RequestPart, str] = {
    "queue": "queue",
    "prefill": "prefill",
    "server_frontend": "front\nend",
    "gateway": "gateway",
    "outside_server": "outside\nserver",
}
_LETTER = {"span": "s", "histogram": "h"}
PARTS_FOOTNOTE = (
    "ms per request, p50 and p90 over the requests that had the part; n: how many had it, "
    "s from spans, h from /metrics histograms (exact only one request at a time). outside "
    "server = client TTFT - server TTFT, so it includes the gateway's own work."
)


def _ms(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def sources_cell(sources: Mapping[str, int]) -> str:
    """How many requests had the part, by source: ``12s+3h``; ``–`` for none.

    >>> sources_cell({"span": 12, "histogram": 3}), sources_cell({})
    ('12s+3h', '–')
    """
    cells = [f"{n:,}{_LETTER.get(k, '?')}" for k, n in sorted(sources.items(), reverse=True) if n]
    return "+".join(cells) or "–"


def parts_table(groups: Sequence[Mapping[str, Any]], title: str = "") -> Table:
    """Per context bucket and target: p50, p90 and n (with sources) of each part.

    >>> g = {"context": "8K–16K", "target": "direct", "requests": 3, "median_queue_ms": 1.0,
    ...      "p90_queue_ms": 1.8, "queue_sources": {"span": 3}}
    >>> t = parts_table([g]); t.row_count, len(t.columns)
    (3, 9)
    """
    table = Table(
        title=escape(title) or None,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=0,
        show_edge=False,
    )
    table.add_column("context\ntokens", justify="right", no_wrap=True)
    table.add_column("target", no_wrap=True, max_width=12, overflow="ellipsis")
    table.add_column("reqs", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for part in REQUEST_PARTS:
        table.add_column(_HEADERS[part], justify="right", no_wrap=True)
    for g in groups:
        head = [escape(str(g.get("context", ""))), escape(str(g.get("target", "")))]
        head.append(f"{g.get('requests', 0):,}")
        table.add_row(*head, "p50", *(_ms(g.get(f"median_{p}_ms")) for p in REQUEST_PARTS))
        table.add_row("", "", "", "p90", *(_ms(g.get(f"p90_{p}_ms")) for p in REQUEST_PARTS))
        counts = (sources_cell(g.get(f"{p}_sources") or {}) for p in REQUEST_PARTS)
        table.add_row("", "", "", "n", *counts, end_section=True)
    return table
