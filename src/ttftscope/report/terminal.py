"""Rich tables for the terminal."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cold\nTTFT", "cold_ttft_ms"),
    ("TTFT\np50", "median_ttft_ms"),
    ("TTFT\np90", "p90_ttft_ms"),
    ("server\nTTFT", "median_server_ttft_ms"),
    ("queue", "median_queue_ms"),
    ("prefill", "median_prefill_ms"),
    ("server\nfront end", "median_server_frontend_ms"),
    ("outside\nserver", "median_outside_server_ms"),
    ("client\nserialize", "median_serialize_ms"),
    ("client\ntokenize", "median_tokenize_ms"),
)
# Wide enough for the whole table when output is not a terminal (CI logs, pipes, notes).
_PIPE_WIDTH = 160


def _ms(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def breakdown_table(summary: dict[str, Any]) -> Table:
    """Per context size and variant: where the warm TTFT goes (medians, ms).

    >>> breakdown_table({"groups": [], "model": "m"}).row_count
    0
    """
    table = Table(
        title=f"TTFT breakdown, {summary.get('model', '')} (ms; warm medians)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("context\ntokens", justify="right")
    table.add_column("variant")
    table.add_column("n", justify="right")
    for title, _ in _COLUMNS:
        table.add_column(title, justify="right")
    table.add_column("prefix\nhit rate", justify="right")
    table.add_column("computed\ntokens", justify="right")
    for g in summary.get("groups", []):
        hit = g.get("prefix_hit_rate")
        computed = g.get("computed_tokens")
        table.add_row(
            f"{g['context_tokens']:,}",
            g["variant"],
            str(g["n"]),
            *(_ms(g.get(key)) for _, key in _COLUMNS),
            "–" if hit is None else f"{hit:.3f}",
            "–" if computed is None else f"{computed:,.0f}",
        )
    return table


def print_probe_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the breakdown table, the A/B verdict and anything that needs attention."""
    console = console or Console()
    if not console.is_terminal:
        console = Console(file=console.file, width=max(console.width, _PIPE_WIDTH))
    console.print(breakdown_table(summary))
    ratio = summary.get("ab_ttft_ratio_text_over_ids")
    if ratio is not None:
        console.print(
            f"A/B text vs token ids: median TTFT {_ms(summary['ab_text_median_ttft_ms'])} ms vs "
            f"{_ms(summary['ab_ids_median_ttft_ms'])} ms (text/ids = {ratio:.2f}×); server front "
            f"end {_ms(summary['ab_text_median_server_frontend_ms'])} ms vs "
            f"{_ms(summary['ab_ids_median_server_frontend_ms'])} ms"
        )
    for kind, info in summary.get("failures", {}).items():
        console.print(
            f"[yellow]failed:[/yellow] {info['count']} × {escape(kind)} "
            f"(not counted as latency), e.g. {escape(str(info['example']))}",
            highlight=False,
        )
    if summary.get("contaminated"):
        console.print(
            f"[yellow]note:[/yellow] {summary['contaminated']} sample(s) overlapped "
            "another client's requests and were left out"
        )
    if summary.get("checks_failed"):
        console.print(
            f"[yellow]note:[/yellow] {summary['checks_failed']} sample(s) failed a "
            "consistency check; see the JSONL records"
        )
    for note in summary.get("notes", []):
        console.print(f"[dim]note:[/dim] {escape(note)}", highlight=False)
