"""One request's waterfall: where its time to first token went, bar by bar on one time axis.

For the slowest and the median request of each run (by client TTFT): the client's phases
from the record (tokenize, serialize, connect, send, headers, first event, first token),
then the trace's spans (the gateway's stages, vLLM's request) when the record has them,
with queue and prefill drawn inside vLLM's span from the times it carries.
A record without spans gets the server's parts from its fields instead, placed to end at
the client's first token in vLLM's order (front end, queue, prefill): their lengths are
measured, their position is an estimate, and the subplot's title says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

# plotly ships no type information
import plotly.graph_objects as go  # type: ignore[import-untyped, unused-ignore]
from plotly.subplots import make_subplots  # type: ignore[import-untyped, unused-ignore]

from ttftscope.records import RequestRecord, SpanService
from ttftscope.report.compare import ms
from ttftscope.report.style import empty, layout, plain
from ttftscope.results.parts import latency_samples, series_name
from ttftscope.results.runs import Run
from ttftscope.tracing.names import VLLM_SPAN

__all__ = ["Step", "picked_requests", "request_steps", "waterfall_figure"]

Pick = Literal["slowest", "median"]
SERVICE_COLOURS: dict[SpanService, str] = {
    "client": "#9e9e9e",
    "gateway": "#e69f00",
    "server": "#3182bd",
}


@dataclass(frozen=True)
class Step:
    """One bar: who, what, from when to when (ms from the start of the client's work)."""

    service: SpanService
    name: str
    start_ms: float
    end_ms: float

    @property
    def label(self) -> str:
        """``service · name``, as the bar's row is titled."""
        return f"{self.service} · {self.name}"


def client_steps(r: RequestRecord) -> list[Step]:
    """The client's phases: its own work, then each stamp of the request after sending.

    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   serialize_ms=1.0, headers_ms=5.0, wire_ttft_ms=9.0)
    >>> [(s.name, s.start_ms, s.end_ms) for s in client_steps(r)]
    [('serialize', 0.0, 1.0), ('headers', 1.0, 6.0), ('first token', 6.0, 10.0)]
    """
    tok, ser = r.tokenize_ms or 0.0, r.serialize_ms or 0.0
    out = []
    if r.tokenize_ms:
        out.append(Step("client", "tokenize", 0.0, tok))
    if r.serialize_ms:
        out.append(Step("client", "serialize", tok, tok + ser))
    prev = sent = tok + ser  # the phase stamps count from just before sending
    for name, at in (
        ("connect", r.connect_ms),
        ("send", r.request_sent_ms),
        ("headers", r.headers_ms),
        ("first event", r.first_event_ms),
        ("first token", r.wire_ttft_ms),
    ):
        if at is not None:
            out.append(Step("client", name, prev, sent + at))
            prev = sent + at
    return out


def estimated_server_steps(r: RequestRecord) -> list[Step]:
    """The server's parts from the record's fields, ending at the client's first token.

    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   client_ttft_ms=50.0, server_ttft_ms=40.0, server_frontend_ms=5.0,
    ...                   queue_ms=10.0, prefill_ms=25.0)
    >>> [(s.name, s.start_ms, s.end_ms) for s in estimated_server_steps(r)]
    [('front end', 10.0, 15.0), ('queue', 15.0, 25.0), ('prefill', 25.0, 50.0)]
    """
    if r.server_ttft_ms is None or r.client_ttft_ms is None:
        return []
    at = r.client_ttft_ms - r.server_ttft_ms
    out = []
    for name, value in (
        ("front end", r.server_frontend_ms),
        ("queue", r.queue_ms),
        ("prefill", r.prefill_ms),
    ):
        if value is not None:
            out.append(Step("server", name, at, at + max(value, 0.0)))
            at += max(value, 0.0)
    return out


def request_steps(r: RequestRecord) -> tuple[list[Step], bool]:
    """The request's bars in order, and whether they come from its trace's spans.

    >>> from ttftscope.records import SpanTiming
    >>> r = RequestRecord(run_id="r", index=0, variant="gateway", phase="warm", ok=True,
    ...                   wire_ttft_ms=9.0, spans=[SpanTiming(service="server",
    ...                   name="llm_request", start_ms=2.0, end_ms=8.0)])
    >>> steps, traced = request_steps(r); [s.label for s in steps], traced
    (['client · first token', 'server · llm_request'], True)
    """
    if not r.spans:
        return client_steps(r) + estimated_server_steps(r), False
    spans = sorted(r.spans, key=lambda s: (s.start_ms, -s.end_ms))
    traced = [Step(s.service, s.name, s.start_ms, s.end_ms) for s in spans]
    return client_steps(r) + traced + engine_steps(r), True


def engine_steps(r: RequestRecord) -> list[Step]:
    """Queue and prefill inside vLLM's ``llm_request`` span, when no span of their own.

    vLLM's span starts at the request's arrival (where server TTFT starts) and carries the
    queue and prefill times as attributes, which the record holds: queue follows the front
    end's work, prefill follows queue.

    >>> from ttftscope.records import SpanTiming
    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   server_frontend_ms=2.0, queue_ms=3.0, prefill_ms=5.0,
    ...                   spans=[SpanTiming(service="server", name="llm_request",
    ...                                     start_ms=10.0, end_ms=30.0)])
    >>> [(s.name, s.start_ms, s.end_ms) for s in engine_steps(r)]
    [('queue', 12.0, 15.0), ('prefill', 15.0, 20.0)]
    """
    names = {s.name for s in r.spans if s.service == "server"}
    arrival = next((s.start_ms for s in r.spans if s.name == VLLM_SPAN), None)
    if arrival is None or names & {"queue", "prefill"}:
        return []
    at = arrival + max(r.server_frontend_ms or 0.0, 0.0)
    out = []
    for name, value in (("queue", r.queue_ms), ("prefill", r.prefill_ms)):
        if value is not None:
            out.append(Step("server", name, at, at + max(value, 0.0)))
            at += max(value, 0.0)
    return out


def picked_requests(run: Run) -> list[tuple[Pick, RequestRecord]]:
    """The run's slowest request and its median one (the lower middle) by client TTFT.

    A run of one request has it once, as the slowest.

    >>> picked_requests(Run(kind="bench", key="k", label="b", parts=()))
    []
    """
    timed = [r for r in latency_samples(run.records, run.kind) if r.client_ttft_ms is not None]
    ranked = sorted(timed, key=lambda r: (r.client_ttft_ms or 0.0, r.index))
    if not ranked:
        return []
    out: list[tuple[Pick, RequestRecord]] = [("slowest", ranked[-1])]
    middle = ranked[(len(ranked) - 1) // 2]
    if middle is not ranked[-1]:
        out.append(("median", middle))
    return out


def _title(run: Run, pick: Pick, r: RequestRecord, traced: bool, many: bool) -> str:
    where = "spans" if traced else "record fields; server bars placed by estimate"
    head = f"{run.label} · " if many else ""
    return plain(
        f"{head}{pick} request: #{r.index}, {series_name(r)}, "
        f"{r.context_tokens_target:,} tokens, TTFT {ms(r.client_ttft_ms or 0.0)} ms ({where})"
    )


def _bar(steps: Sequence[Step], pick: Pick) -> Any:
    return go.Bar(
        y=[plain(s.label) for s in steps],
        x=[s.end_ms - s.start_ms for s in steps],
        base=[s.start_ms for s in steps],
        orientation="h",
        name=pick,
        showlegend=False,
        marker_color=[SERVICE_COLOURS[s.service] for s in steps],
        hovertemplate="%{y}: %{base:.1f} → %{customdata:.1f} ms<extra></extra>",
        customdata=[s.end_ms for s in steps],
    )


def waterfall_figure(runs: Sequence[Run]) -> Any:
    """A row per picked request: its bars on one ms axis, earliest at the top.

    >>> waterfall_figure([]).layout.annotations[0].text
    'no request with a client TTFT'
    """
    rows = [(run, pick, r, *request_steps(r)) for run in runs for pick, r in picked_requests(run)]
    if not rows:
        return empty(
            layout(go.Figure(), x="ms from the start of the client's work", y=""),
            "no request with a client TTFT",
        )
    counts = [max(len(steps), 1) for *_, steps, _ in rows]
    height = 90 + 24 * sum(counts) + 60 * len(rows)
    fig = make_subplots(
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        row_heights=[c / sum(counts) for c in counts],
        vertical_spacing=min(60 / height, 0.3 / len(rows)),
        subplot_titles=[_title(run, p, r, t, len(runs) > 1) for run, p, r, _, t in rows],
    )
    for i, (_, pick, _, steps, _) in enumerate(rows, start=1):
        fig.add_trace(_bar(steps, pick), row=i, col=1)
    fig = layout(fig, x="", y="")
    fig.update_xaxes(title_text="ms from the start of the client's work", row=len(rows), col=1)
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_annotations(font_size=13, x=0, xanchor="left")
    fig.update_layout(height=height)
    return fig
