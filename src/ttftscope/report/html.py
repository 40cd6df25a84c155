"""One self-contained HTML file: the doctor's diagnosis, a table of the runs, the plots, the notes.

plotly's library is inlined once in the head and every figure only calls it, so the file
works from a laptop's disk with no network: no CDN, no web fonts (system fonts only), no
images to fetch. Every text from a result directory is escaped.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Sequence
from pathlib import Path

# plotly ships no type information
import plotly.offline  # type: ignore[import-untyped, unused-ignore]

from ttftscope.errors import ConfigError
from ttftscope.findings import Diagnosis, Finding
from ttftscope.records import RequestRecord
from ttftscope.report.compare import Comparison, comparisons, ms
from ttftscope.report.figures import Plot, report_plots
from ttftscope.results.parts import Buckets, hit_rate, latency_samples, split_series
from ttftscope.results.request_parts import (
    NO_PARTS,
    REQUEST_PART_LABELS,
    REQUEST_PARTS,
    has_request_parts,
    parts_by_bucket,
)
from ttftscope.results.runs import Run
from ttftscope.stats import percentile

_CONFIG = {"displaylogo": False, "responsive": True}
_BADGE = {"info": "note", "warning": "warning", "critical": "critical"}
_CODE = re.compile(r"`([^`]+)`")
LEAD_PLOT = "ttft-parts"  # "where TTFT goes": the chart that leads, under the verdict
# a plot drawn inside a closed <details> has no width yet: redraw those inside on opening
_RESIZE_JS = (
    "document.querySelectorAll('details').forEach(d => d.addEventListener('toggle', () => "
    "d.querySelectorAll('.js-plotly-plot').forEach(p => Plotly.Plots.resize(p))));"
)
_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif;
  margin: 0 auto; max-width: 1200px; padding: 24px; color: #1f2328; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 0 0 6px; }
.sub { color: #59636e; font-size: 13px; margin-bottom: 18px; }
.diagnosis { border-radius: 8px; padding: 14px 18px; margin-bottom: 20px; border: 1px solid; }
.diagnosis.healthy { background: #eef9f0; border-color: #8fd19e; }
.diagnosis.act { background: #fff8e6; border-color: #f0c36d; }
.diagnosis.warn { background: #fdeeee; border-color: #e5989b; }
.verdict { font-size: 17px; line-height: 1.5; border-radius: 8px; padding: 14px 18px;
  margin: 0 0 16px; border: 1px solid; }
.verdict.healthy { background: #eef9f0; border-color: #8fd19e; }
.verdict.act { background: #fff8e6; border-color: #f0c36d; }
.lead { margin-bottom: 16px; }
details { margin: 10px 0; border-top: 1px solid #e5e7ea; padding-top: 8px; }
summary { cursor: pointer; font-weight: 600; font-size: 15px; padding: 4px 0; }
.headline { font-size: 17px; margin: 0 0 10px; line-height: 1.45; }
.findings { margin: 0; padding-left: 0; list-style: none; }
.findings > li { margin: 8px 0; line-height: 1.45; }
.findings ul { margin: 2px 0 0 76px; padding-left: 14px; font-size: 14px; }
.remedy { margin: 2px 0 0 76px; font-size: 14px; }
.measured, .checked { color: #59636e; font-size: 13px; margin: 8px 0 0; }
.badge { display: inline-block; min-width: 58px; text-align: center; font-size: 11px;
  font-weight: 700; text-transform: uppercase; border-radius: 4px; padding: 1px 6px;
  margin-right: 8px; color: #fff; }
.badge.info { background: #6e7781; } .badge.warning { background: #bf8700; }
.badge.critical { background: #cf222e; }
code { background: #f0f2f4; border-radius: 4px; padding: 0 4px; font-size: 90%; }
table { border-collapse: collapse; font-size: 13px; margin-bottom: 20px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e5e7ea; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.name { text-align: left; }
tr.run th { text-align: left; padding-top: 10px; color: #59636e; font-weight: 600; }
/* auto-fill, not auto-fit: a plot is drawn while the page is still parsed, and must get the
   width it keeps once the other cards exist */
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 18px;
  grid-auto-flow: row dense; }
.card { border: 1px solid #e5e7ea; border-radius: 8px; padding: 12px 14px; min-width: 0; }
.card.wide { grid-column: 1 / -1; }
.caption { color: #59636e; font-size: 13px; margin: 0 0 6px; }
.notes { color: #59636e; font-size: 13px; }
"""


def _text(value: str) -> str:
    """Escaped text with `code` spans."""
    return _CODE.sub(r"<code>\1</code>", html.escape(value))


def _finding(f: Finding) -> str:
    badge = f'<span class="badge {f.severity}">{_BADGE[f.severity]}</span>'
    sources = list(dict.fromkeys(e.source for e in f.evidence))
    facts = "".join(
        f"<li>{_text(e.fact)}{'' if len(sources) == 1 else f' ({_text(e.source)})'}</li>"
        for e in f.evidence
    )
    origin = f"<li class='checked'>from {_text(sources[0])}</li>" if len(sources) == 1 else ""
    save = f" (saves ~{f.saving_ms:,.0f} ms per request)" if f.saving_ms else ""
    return (
        f"<li>{badge}<b>{_text(f.title)}</b> <span class='checked'>{_text(f.id)}</span>"
        f"<ul>{facts}{origin}</ul><p class='remedy'>→ {_text(f.remedy + save)}</p></li>"
    )


def diagnosis_html(diagnosis: Diagnosis, measured: Sequence[Comparison] = ()) -> str:
    """The doctor's findings, worst first, then the measured A/Bs and what was checked.

    >>> "no problem found" in diagnosis_html(Diagnosis(checked=["1 run(s)"]))
    True
    """
    if diagnosis.healthy:
        tone = "healthy"
    elif any(f.severity == "critical" for f in diagnosis.findings):
        tone = "warn"
    else:
        tone = "act"
    head = (
        "<p class='headline'>✓ no problem found in what was checked</p>"
        if diagnosis.healthy
        else ""
    )
    items = "\n".join(_finding(f) for f in diagnosis.findings)
    pairs = "".join(f"<li>{_text(c.subject)}: {_text(c.text)}</li>" for c in measured)
    return (
        f'<section class="diagnosis {tone}" id="diagnosis">{head}'
        f'<ul class="findings">{items}</ul>'
        + (f"<ul class='measured'>{pairs}</ul>" if pairs else "")
        + f"<p class='checked'>checked: {_text('; '.join(diagnosis.checked))}</p></section>"
    )


def _row(label: str, kind: str, records: Sequence[RequestRecord]) -> str:
    ttfts = [r.client_ttft_ms for r in records]
    rate = hit_rate(records)
    cells = [label, kind, f"{len(records):,}"]
    for q in (50, 90, 99):
        value = percentile(ttfts, q)
        cells.append("–" if value is None else ms(value))
    cells.append("–" if rate is None else f"{rate:.3f}")
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def _rows(run: Run) -> list[str]:
    """A row per series; a probe's per context size too, as its own table has them."""
    out = []
    for s in split_series(run):
        if run.kind != "probe":
            out.append(_row(s.name, run.kind, s.records))
            continue
        buckets = Buckets.for_records(s.records)
        for key in sorted({buckets.key(r) for r in s.records}):
            mine = [r for r in s.records if buckets.key(r) == key]
            out.append(_row(f"{s.name}, {buckets.label(key)}", run.kind, mine))
    return out


def runs_table(runs: Sequence[Run]) -> str:
    """One row per series (and probed context size): n, TTFT percentiles (ms), hit rate;
    several runs each under a row that names it once.

    >>> runs_table([]).startswith("<table>")
    True
    """
    head = "".join(
        f"<th>{h}</th>" for h in ("series", "kind", "n", "TTFT p50", "p90", "p99", "hit rate")
    )
    rows = []
    for run in runs:
        if len(runs) > 1:
            rows.append(f"<tr class='run'><th colspan='7'>{html.escape(run.label)}</th></tr>")
        rows += _rows(run)
    failed = sum(not r.ok for run in runs for r in run.records)
    note = f"<p class='notes'>{failed:,} failed request(s), not counted as latency.</p>"
    return f"<table><tr>{head}</tr>\n" + "\n".join(rows) + "</table>" + (note if failed else "")


_PARTS_NOTE = (
    "ms per request: p50 / p90 over the requests that had the part, then how many had it and "
    "where their values came from (span: the request's own trace; histogram: a /metrics "
    "delta, exact only when one request ran at a time). Outside the server = client TTFT − "
    "server TTFT, so it includes the gateway's own work."
)


def _parts_cells(group: dict[str, object]) -> str:
    cells = []
    for part in REQUEST_PARTS:
        p50, p90 = group.get(f"median_{part}_ms"), group.get(f"p90_{part}_ms")
        found = group.get(f"{part}_sources")
        sources: dict[str, int] = found if isinstance(found, dict) else {}
        told = ", ".join(f"{n:,} {k}" for k, n in sorted(sources.items(), reverse=True))
        if not isinstance(p50, float | int) or not isinstance(p90, float | int):
            cells.append("<td>–</td>")
            continue
        cells.append(
            f"<td>{ms(p50)} / {ms(p90)}<br><span class='notes'>{html.escape(told)}</span></td>"
        )
    return "".join(cells)


_KINDS = ("name", "name", "count")


def request_parts_html(runs: Sequence[Run]) -> str:
    """Per run, context bucket and target: p50 / p90 of each part and how many requests had
    it from which source; a run without per-request parts says so.

    >>> request_parts_html([])
    ''
    """
    head = "".join(f"<th>{h}</th>" for h in ("context tokens", "target", "requests"))
    head += "".join(f"<th>{REQUEST_PART_LABELS[p]}<br>p50 / p90</th>" for p in REQUEST_PARTS)
    rows, missing = [], []
    for run in runs:
        groups = parts_by_bucket(latency_samples(run.records, run.kind), run.kind)
        if not has_request_parts(groups):
            missing.append(f"<p class='notes'>{html.escape(run.label)}: {_text(NO_PARTS)}.</p>")
            continue
        if len(runs) > 1:
            rows.append(f"<tr class='run'><th colspan='8'>{html.escape(run.label)}</th></tr>")
        for g in groups:
            cells = (str(g["context"]), str(g["target"]), f"{g['requests']:,}")
            rows.append(
                "<tr>"
                + "".join(
                    f"<td class='{k}'>{html.escape(c)}</td>"
                    for k, c in zip(_KINDS, cells, strict=True)
                )
                + _parts_cells(g)
                + "</tr>"
            )
    if not rows and not missing:
        return ""
    table = (
        f"<table id='request-parts'><tr>{head}</tr>\n" + "\n".join(rows) + "</table>"
        f"<p class='notes'>{_text(_PARTS_NOTE)}</p>"
        if rows
        else ""
    )
    return "<h2>Per-request parts, by context size and target</h2>" + table + "".join(missing)


def _plot_html(plot: Plot) -> str:
    div = plot.figure.to_html(
        full_html=False, include_plotlyjs=False, div_id=plot.key, config=_CONFIG
    )
    return (
        f'<section class="card{" wide" if plot.wide else ""}"><h2>{html.escape(plot.title)}</h2>'
        f'<p class="caption">{_text(plot.caption)}</p>{div}</section>'
    )


def _subtitle(runs: Sequence[Run], generated: str) -> str:
    models = sorted({m for run in runs if (m := run.model)})
    sources = ", ".join(str(p) for run in runs for p in run.sources)
    model = f"model {', '.join(models)} · " if models else ""
    return f"{model}{len(runs)} run(s) from {sources} · generated {generated}"


def render_html(runs: Sequence[Run], diagnosis: Diagnosis, *, generated: str | None = None) -> str:
    """The whole page as one string, plotly's library inlined exactly once.

    >>> page = render_html([], Diagnosis(), generated="now")
    >>> page.startswith("<!doctype html>"), page.count("<script type=\\"text/javascript\\">")
    (True, 1)
    """
    generated = generated or time.strftime("%Y-%m-%d %H:%M")
    notes = [n for run in runs for n in run.notes]
    notes_html = "".join(f"<li>{_text(n)}</li>" for n in notes)
    plots = report_plots(runs)
    lead = "\n".join(_plot_html(p) for p in plots if p.key == LEAD_PLOT)
    rest = "\n".join(_plot_html(p) for p in plots if p.key != LEAD_PLOT)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>ttftscope report</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script></head>'
        f"<body><h1>Where time to first token goes</h1>"
        f'<div class="sub">{_text(_subtitle(runs, generated))}</div>'
        f"{verdict_html(diagnosis)}<div class='lead'>{lead}</div>"
        + _fold(_findings_summary(diagnosis), diagnosis_html(diagnosis, comparisons(runs)))
        + _fold("The runs and their per-request parts", runs_table(runs) + request_parts_html(runs))
        + _fold(_plots_summary(plots), f'<div class="grid">{rest}</div>')
        + (_fold(f"Notes ({len(notes)})", f'<ul class="notes">{notes_html}</ul>') if notes else "")
        + f"<script>{_RESIZE_JS}</script></body></html>\n"
    )


def verdict_html(diagnosis: Diagnosis) -> str:
    """The verdict paragraph that leads the page (:meth:`Diagnosis.verdict`).

    >>> verdict_html(Diagnosis())
    '<p class="verdict healthy" id="verdict">✓ no problem found in what was checked.</p>'
    """
    tone = "healthy" if diagnosis.healthy else "act"
    return f'<p class="verdict {tone}" id="verdict">{_text(diagnosis.verdict())}</p>'


def _fold(summary: str, body: str) -> str:
    """A section folded under its one-line summary."""
    return f"<details><summary>{_text(summary)}</summary>{body}</details>"


def _findings_summary(d: Diagnosis) -> str:
    n = len(d.findings)
    return f"The findings ({n}): evidence, remedies, measured A/Bs" if n else "What was checked"


def _plots_summary(plots: Sequence[Plot]) -> str:
    return "More plots: " + ", ".join(p.title for p in plots if p.key != LEAD_PLOT)


def write_report(runs: Sequence[Run], diagnosis: Diagnosis, path: Path) -> Path:
    """Write the page to ``path`` (its folder is made if needed); returns ``path``.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "sub" / "report.html"
    >>> write_report([], Diagnosis(), p).stat().st_size > 1_000_000  # plotly.js inside
    True
    """
    page = render_html(runs, diagnosis)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the report to {path}: {exc.strerror or exc}",
            hint="pass --out with a writable path, e.g. --out ./report.html",
        ) from None
    return path
