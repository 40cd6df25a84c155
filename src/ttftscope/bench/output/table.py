"""The bench's terminal table: one row per target, fitting an 80-column terminal.

The title names the run, the model and the API the requests spoke; the rows: completed,
failed, requests per second, TTFT p50 and p99, TPOT p50 (ms) and the peak of the waiting
queue of the server behind the target. Then the per-request parts by context bucket and
target (``results.parts_table``), or, when no request had its own, a line that says so with
the run-wide means from the servers' histograms. The summary JSON holds every figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttftscope.results.parts_table import PARTS_FOOTNOTE, parts_table
from ttftscope.results.request_parts import NO_PARTS, has_request_parts

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("done", "completed"),
    ("failed", "failed"),
    ("req/s", "request_throughput"),
    ("TTFT\np50", "median_ttft_ms"),
    ("TTFT\np99", "p99_ttft_ms"),
    ("TPOT\np50", "median_tpot_ms"),
    ("queue\npeak", "peak_waiting"),
)


def _cell(key: str, value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return escape(str(value))
    if key.endswith("_ms"):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"
    if key == "request_throughput":
        return f"{value:.2f}"
    return f"{value:g}"


def _api(api: object) -> str:
    return f"{api} API" if api else ""


def bench_table(summary: Mapping[str, Any]) -> Table:
    """Per target: counts, throughput, TTFT p50/p99, TPOT p50 and the queue's peak.

    >>> t = bench_table({"targets": {"direct": {"completed": 3}}, "model": "m", "api": "messages"})
    >>> t.row_count, len(t.columns), str(t.title)
    (1, 8, 'bench m · messages API')
    """
    parts = (summary.get("run_id", ""), summary.get("model", ""), _api(summary.get("api")))
    title = ("bench " + " · ".join(str(p) for p in parts if p)).strip()
    table = Table(title=escape(title), box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("target", no_wrap=True, max_width=14, overflow="ellipsis")
    for header, _key in _COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
    targets: Mapping[str, Mapping[str, Any]] = summary.get("targets", {})
    for name, row in targets.items():
        table.add_row(escape(name), *(_cell(k, row.get(k)) for _h, k in _COLUMNS))
    return table


def print_bench_summary(summary: Mapping[str, Any], console: Console) -> None:
    """The table, then what needs attention: contamination, cancellations.

    >>> import io; out = io.StringIO()
    >>> print_bench_summary({"targets": {}, "contaminated": True}, Console(file=out, width=80))
    >>> "CONTAMINATED" in out.getvalue()
    True
    """
    console.print(bench_table(summary))
    console.print(
        f"ms · {summary.get('duration', 0):.1f} s · {summary.get('completed', 0)} completed, "
        f"{summary.get('failed', 0)} failed · queue peak = server's num_requests_waiting",
        highlight=False,
    )
    if summary.get("contaminated"):
        console.print(
            f"[bold red]CONTAMINATED[/bold red]: {summary.get('rate_limited', 0)} of the "
            f"requests were rate limited (429, {summary.get('rate_limited_share', 0):.1%}). "
            f"{escape(str(summary.get('contamination_advice') or ''))}",
            highlight=False,
        )
    print_bench_parts(summary, console)
    if summary.get("cancelled"):
        console.print(
            f"{summary['cancelled']} request(s) in flight at the end of --duration were "
            "cancelled (not counted)",
            highlight=False,
        )


_MEANS = (
    ("queue", "server_mean_queue_ms"),
    ("prefill", "server_mean_prefill_ms"),
    ("front end", "server_mean_frontend_ms"),
)


def print_bench_parts(summary: Mapping[str, Any], console: Console) -> None:
    """Per-request parts by context bucket and target, or why there are none and the
    run-wide histogram means instead.

    >>> import io; out = io.StringIO()
    >>> print_bench_parts({"server_mean_queue_ms": 4.5}, Console(file=out, width=80))
    >>> print(out.getvalue().strip().splitlines()[-1])
    run-wide means from /metrics histograms: queue 4.5 ms
    """
    groups: list[Mapping[str, Any]] = list(summary.get("parts_by_bucket") or [])
    if has_request_parts(groups):
        console.print()
        console.print(parts_table(groups, "per-request TTFT parts (ms)"))
        console.print(PARTS_FOOTNOTE, highlight=False, style="dim")
        return
    console.print(f"per-request parts: {NO_PARTS}", highlight=False, style="dim")
    means = [
        f"{name} {_cell(key, summary.get(key))} ms"
        for name, key in _MEANS
        if summary.get(key) is not None
    ]
    if means:
        console.print(
            "run-wide means from /metrics histograms: " + ", ".join(means), highlight=False
        )
