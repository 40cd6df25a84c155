"""Rich output for the terminal: a breakdown that fits 80 columns (every column with ``wide``),
the doctor's diagnosis (``doctor`` and ``report`` print it the same way), measured A/Bs and
each bench run's per-request parts by context bucket and target (or the run-wide histogram means
when no request had its own).

Medians are taken part by part over warm requests, so they need not add up to the TTFT
median; the table says so in a footnote rather than pretending otherwise.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttftscope.findings import Diagnosis, Finding
from ttftscope.report.compare import Comparison, ms
from ttftscope.report.where import where_lines
from ttftscope.results.parts import PART_LABELS, latency_samples
from ttftscope.results.parts_table import PARTS_FOOTNOTE, parts_table
from ttftscope.results.request_parts import NO_PARTS, has_request_parts, parts_by_bucket
from ttftscope.results.runs import Run
from ttftscope.results.servers import server_figures

# (header, summary key) of the columns every table shows, then those only the wide one adds.
_NARROW: tuple[tuple[str, str], ...] = (
    ("cold\nTTFT", "cold_ttft_ms"),
    ("TTFT\np50", "median_ttft_ms"),
    ("queue", "median_queue_ms"),
    ("prefill", "median_prefill_ms"),
    ("front\nend", "median_server_frontend_ms"),
    ("outside\nserver", "median_outside_server_ms"),
    ("client\ntokenize", "median_tokenize_ms"),
)
_WIDE: tuple[tuple[str, str], ...] = (
    ("cold\nTTFT", "cold_ttft_ms"),
    ("TTFT\np50", "median_ttft_ms"),
    ("TTFT\np90", "p90_ttft_ms"),
    ("server\nTTFT", "median_server_ttft_ms"),
    ("queue", "median_queue_ms"),
    ("prefill", "median_prefill_ms"),
    ("server\nfront end", "median_server_frontend_ms"),
    ("of it\nrender", "median_server_render_ms"),
    ("outside\nserver", "median_outside_server_ms"),
    ("client\nserialize", "median_serialize_ms"),
    ("client\ntokenize", "median_tokenize_ms"),
)
FOOTNOTE = (
    "ms, medians of warm requests, part by part: the parts' medians need not add up to the "
    "TTFT median. front end = server TTFT - queue - prefill (chat rendering, tokenization); "
    "outside server = network, HTTP and JSON before the server's clock starts."
)
# Context 0 has no synthetic context. The chat paths still send a conversation that grows
# turn by turn (its earlier turns are cached); the text/ids A/B sends each prompt as one
# fresh turn alone, so nothing of it can be in the prefix cache.
_ZERO_CHAT = (
    "Context 0 has no synthetic context: {rows} send only the system prompt and the "
    "conversation so far, which grows by a fresh ~1.4K-character turn per request."
)
_ZERO_AB = (
    "At context 0 text and ids send a fresh ~1.4K-character turn alone: nothing is reused, "
    "so their hit rate is 0."
)
_CHAT_PATHS = ("chat", "direct", "gateway")


def footnotes(groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table's footnote, and what context 0 sent when a context-0 row ran.

    >>> [n[:12] for n in footnotes([{"context_tokens": 8000, "variant": "chat"}])]
    ['ms, medians ']
    >>> footnotes([{"context_tokens": 0, "variant": "ids"}])[1][:40]
    'At context 0 text and ids send a fresh ~'
    """
    zero = [str(g.get("variant")) for g in groups if g.get("context_tokens") == 0]
    out = [FOOTNOTE]
    chats = [v for v in _CHAT_PATHS if v in zero]
    if chats:
        out.append(_ZERO_CHAT.format(rows="the " + "/".join(chats) + " rows"))
    if "text" in zero or "ids" in zero:
        out.append(_ZERO_AB)
    return out


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def breakdown_table(summary: Mapping[str, Any], *, wide: bool = False) -> Table:
    """Per context size and variant: where the warm TTFT goes (medians, ms).

    >>> breakdown_table({"groups": [], "model": "m"}).row_count
    0
    >>> len(breakdown_table({"groups": []}, wide=True).columns)
    16
    """
    columns = _WIDE if wide else _NARROW
    table = Table(
        title=f"TTFT breakdown, {summary.get('model', '')} (ms)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=0,
        show_edge=False,
    )
    table.add_column("context\ntokens", justify="right", no_wrap=True)
    table.add_column("variant", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for title, _ in columns:
        table.add_column(title, justify="right", no_wrap=True)
    table.add_column("hit\nrate", justify="right", no_wrap=True)
    if wide:
        table.add_column("computed\ntokens", justify="right", no_wrap=True)
    for g in summary.get("groups", []):
        hit = g.get("prefix_hit_rate")
        row = [f"{g['context_tokens']:,}", g["variant"], str(g["n"])]
        row += [_ms(g.get(key)) for _, key in columns]
        row.append("–" if hit is None else f"{hit:.3f}")
        if wide:
            computed = g.get("computed_tokens")
            row.append("–" if computed is None else f"{computed:,.0f}")
        table.add_row(*row)
    return table


def ab_lines(
    pairs: Sequence[Mapping[str, Any]], first: str = "text", second: str = "ids", label: str = "A/B"
) -> list[str]:
    """One line per context size: two variants, the same medians as the table's rows.

    >>> ab_lines([{"context_tokens": 8000, "text_median_ttft_ms": 151.0,
    ...            "ids_median_ttft_ms": 139.0, "ttft_ratio_text_over_ids": 151 / 139,
    ...            "text_median_server_frontend_ms": 20.0,
    ...            "ids_median_server_frontend_ms": 3.5}])
    ['A/B at 8,000 tokens: TTFT text 151 ms vs ids 139 ms (1.09x); front end 20.0 vs 3.5 ms']
    """
    out = []
    for row in pairs:
        ratio = row.get(f"ttft_ratio_{first}_over_{second}")
        shown = "–" if ratio is None else f"{ratio:.2f}x"
        out.append(
            f"{label} at {row['context_tokens']:,} tokens: TTFT {first} "
            f"{_ms(row[f'{first}_median_ttft_ms'])} ms vs {second} "
            f"{_ms(row[f'{second}_median_ttft_ms'])} ms ({shown}); front end "
            f"{_ms(row[f'{first}_median_server_frontend_ms'])} vs "
            f"{_ms(row[f'{second}_median_server_frontend_ms'])} ms"
        )
    return out


def print_probe_summary(
    summary: Mapping[str, Any], console: Console | None = None, *, wide: bool = False
) -> None:
    """Print the breakdown table, the A/B lines and anything that needs attention.

    A console that is not a terminal always gets the wide table (it is read by programs
    and pasted into notes, where width costs nothing).
    """
    console = console or Console()
    console.print(breakdown_table(summary, wide=wide or not console.is_terminal))
    notes = " ".join(footnotes(summary.get("groups", [])))
    console.print(f"\n[dim]{escape(notes)}[/dim]", highlight=False)
    for line in ab_lines(summary.get("ab", [])):
        console.print(line, highlight=False)
    for line in ab_lines(summary.get("gateway_ab", []), "direct", "gateway", "gateway"):
        console.print(line, highlight=False)
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


_MARK_PLAIN = {"critical": "✗", "warning": "!", "info": "i"}
_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}


def print_diagnosis(d: Diagnosis, console: Console, *, headline: bool = True) -> None:
    """The findings, worst first, each with its evidence and remedy; then what was checked.

    >>> import io; from ttftscope.findings import Evidence, Finding
    >>> out = io.StringIO(); c = Console(file=out, width=80, color_system=None)
    >>> f = Finding(id="queueing", severity="warning", title="requests wait",
    ...             evidence=[Evidence(fact="peak 9 waiting", source="b")], remedy="add a replica")
    >>> print_diagnosis(Diagnosis.of([f], ["1 run(s)"]), c)
    >>> print(out.getvalue().strip())
    ! requests wait
      queueing · warning
      • peak 9 waiting
        from b
      → add a replica
    <BLANKLINE>
    checked: 1 run(s)
    """
    if d.healthy and headline:  # after print_verdict, which says it
        console.print("[green]✓ no problem found[/] in what was checked", highlight=False)
    for f in d.findings:
        _print_finding(f, console)
    _hanging(console, "checked: ", "; ".join(d.checked), "dim")
    for note in d.notes:
        _hanging(console, "note: ", note, "dim")


def print_verdict(d: Diagnosis, runs: Sequence[Run], console: Console) -> None:
    """What leads the output: the verdict paragraph, then where TTFT goes; the findings and
    their evidence follow (:func:`print_diagnosis`).

    >>> import io; out = io.StringIO(); c = Console(file=out, width=80, color_system=None)
    >>> print_verdict(Diagnosis(), [], c); print(out.getvalue().strip())
    ✓ no problem found in what was checked.
    """
    _hanging(console, "", d.verdict(), "bold")
    lines = where_lines(runs)
    if lines:
        console.print()
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print()


def _hanging(console: Console, first: str, text: str, style: str = "") -> None:
    """``first`` then ``text`` wrapped to the console, later lines indented under the text."""
    # into a pipe or file: 80 columns, the width people read reports at
    width = max(console.width, 40) if console.is_terminal else 80
    lines = textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=" " * len(first)
    ) or [first]
    for line in lines:
        console.print(line, style=style or None, highlight=False, markup=False, soft_wrap=True)


def _print_finding(f: Finding, console: Console) -> None:
    save = f" (saves ~{f.saving_ms:,.0f} ms per request)" if f.saving_ms else ""
    _hanging(console, _MARK_PLAIN[f.severity] + " ", f.title, _STYLE[f.severity])
    _hanging(console, "  ", f"{f.id} · {f.severity}", "dim")
    sources = list(dict.fromkeys(e.source for e in f.evidence))
    for e in f.evidence:
        tail = "" if len(sources) == 1 else f" ({e.source})"
        _hanging(console, "  • ", e.fact + tail)
    if len(sources) == 1:
        _hanging(console, "    ", f"from {sources[0]}", "dim")
    _hanging(console, "  → ", f.remedy + save, "green")
    console.print()


def print_comparisons(found: Sequence[Comparison], console: Console) -> None:
    """One line per measured switch (text → ids, direct → gateway, target → target).

    >>> import io; out = io.StringIO(); c = Console(file=out, width=80, color_system=None)
    >>> print_comparisons([Comparison("via the gateway", "median TTFT 57.0 → 47.2 ms (-17%)")], c)
    >>> print(out.getvalue().strip())
    measured: via the gateway: median TTFT 57.0 → 47.2 ms (-17%)
    """
    for c in found:
        _hanging(console, "measured: ", f"{c.subject}: {c.text}")


def print_request_parts(runs: Sequence[Run], console: Console) -> None:
    """Each bench run's per-request parts by context bucket and target, p50/p90 and sources;
    a run without them says so and shows its servers' run-wide histogram means instead.
    Probes are left out: ``ttftscope probe`` printed their medians by size and variant.

    >>> import io; out = io.StringIO(); c = Console(file=out, width=80, color_system=None)
    >>> print_request_parts([], c); out.getvalue()
    ''
    """
    shown = False
    for run in runs:
        if run.kind != "bench":  # a probe printed its own table; the page has it too
            continue
        groups = parts_by_bucket(latency_samples(run.records, run.kind), run.kind)
        if has_request_parts(groups):
            console.print()
            console.print(parts_table(groups, f"per-request TTFT parts (ms), {run.label}"))
            shown = True
            continue
        _hanging(console, "", f"{run.label}: {NO_PARTS}", "dim")
        for server in server_figures(run):
            if server.breakdown is not None:
                means = ", ".join(
                    f"{PART_LABELS[part]} {ms(value)}" for part, value in server.breakdown.parts
                )
                _hanging(console, "  ", f"run-wide means (ms), {server.name}: {means}")
    if shown:
        _hanging(console, "", PARTS_FOOTNOTE, "dim")
