"""Finding: TTFT bound by tokenization (client or server front end) that grows with context.

The evidence is a line fit of the front end's time against prompt tokens over the warm
requests of one series (ms per 1K tokens), its share of TTFT at the largest context, and the
prefix-cache hit rate: the better the cache, the more of what is left is tokenization. Where a
run measured the same prompts as text and as ids (``probe --ab ids``) or direct and through
the gateway, the difference is the saving, measured rather than estimated. The server front
end is a finding when it is a large share of TTFT, or when that measured saving is material
in ms: on a slow or loaded machine prefill stretches TTFT and the share shrinks, while the
milliseconds ids save stay. Where the records carry the server's own render time
(``server_render_ms``, vLLM 0.34+) that measured figure is the part and the saving; without
it the front end's remainder stands in for it, and the finding says it is an estimate.

A series already sent through ttftscope's gateway whose front end still dominates points at
the gateway (ids not sent, or passed through as text). A bench run has no per-request server
parts; each server's run-wide histogram means are judged instead, for the targets behind it
(a per-target figure would blame one path for another's requests). Where text and gateway
traffic share one server its mean is nobody's: the measured difference between the two is the
evidence, and the saving is stated for the text traffic only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttftscope.doctor.abtest import MIN_PAIRS, PairedAB, paired_ab, repeat_step, sent_pairs
from ttftscope.doctor.linefit import LineFit, fit_holds, fit_line
from ttftscope.findings import Evidence, Finding
from ttftscope.records import RequestRecord
from ttftscope.results.parts import (
    hit_rate,
    latency_samples,
    records_breakdown,
    series_name,
    split_series,
)
from ttftscope.results.runs import Run
from ttftscope.results.servers import ServerFigures, server_figures
from ttftscope.stats import median

__all__ = [
    "IDS_REMEDY",
    "MIN_SAVING_MS",
    "client_tokenization_findings",
    "measured_saving_ms",
    "server_tokenization_findings",
]

# A front end under this many ms at the largest context is not worth a gateway.
MIN_FRONTEND_MS = 20.0
MIN_SHARE = 0.3
# A measured text-vs-ids (or direct-vs-gateway) saving this large is a finding whatever its
# share of TTFT: the share moves with the machine's speed and load, the saving is evidence.
MIN_SAVING_MS = 20.0
# variants whose prompt the server renders and tokenizes itself
_SERVER_TOKENIZES = ("chat", "text", "direct", "messages", "responses")
IDS_REMEDY = (
    "send token ids so the server skips rendering and tokenizing: run "
    "`ttftscope gateway --upstream URL --model-dir DIR` and point clients at it"
)
_GATEWAY_REMEDY = (
    "check in the gateway's /metrics that it sends ids (ttftscope_gateway_upstream_api) and "
    "why requests pass through as text (ttftscope_gateway_passthrough_total)"
)


def _via_gateway(name: str) -> bool:
    return "gateway" in name


def _tokens(r: RequestRecord) -> float | None:
    n = r.prompt_tokens or r.client_tokens or r.context_tokens_target
    return float(n) if n else None


def _largest(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    sized = [(t, r) for r in records if (t := _tokens(r)) is not None]
    if not sized:
        return list(records)
    top = max(t for t, _ in sized)
    return [r for t, r in sized if t >= 0.8 * top]


@dataclass(frozen=True)
class _Series:
    name: str
    records: list[RequestRecord]


def _series(run: Run) -> list[_Series]:
    samples = latency_samples(run.records, run.kind)
    names = sorted({r.target or r.variant for r in samples})
    return [_Series(n, [r for r in samples if (r.target or r.variant) == n]) for n in names]


def _fit(records: Sequence[RequestRecord], part: str) -> LineFit | None:
    pts = [
        (t / 1000.0, v)
        for r in records
        if (t := _tokens(r)) is not None and (v := getattr(r, part)) is not None
    ]
    return fit_line([x for x, _ in pts], [y for _, y in pts])


@dataclass(frozen=True)
class _Measured:
    """The paired A/B at the largest context and the fact that states it."""

    ab: PairedAB
    fact: str
    slow: str
    fast: str


def _measured(run: Run) -> _Measured | None:
    """Text vs ids (or direct vs gateway) at the largest context, paired, where both ran.

    A probe that sent both forms is judged by its pairs even when none of them was measured
    whole (another client's traffic marks requests, failures): then nothing is decided, and
    the share of one form's few leftover requests does not stand in for the comparison.
    """
    series = {s.name: _largest(s.records) for s in _series(run)}
    sent = {series_name(r) for r in run.records}
    for names in (("text", "ids"), ("direct", "gateway"), ("chat", "gateway")):
        xs, ys = series.get(names[0], []), series.get(names[1], [])
        a, b = sent_pairs(run, names, xs, ys)
        if a or (run.kind == "probe" and set(names) <= sent):
            # the A/B's own prompts: a growing conversation's series is longer at one size
            return _stated(*names, a, b, median(_tokens(r) for r in [*xs, *ys]) or 0.0)
    return None


def _stated(slow: str, fast: str, a: list[float], b: list[float], tokens: float) -> _Measured:
    ab = paired_ab(a, b)
    if not a:
        fact = f"{slow} vs {fast} at ~{tokens:,.0f} tokens: no pair had both requests measured"
        return _Measured(ab, fact, slow, fast)
    fact = (
        f"median TTFT {slow} {median(a):.0f} ms vs {fast} {median(b):.0f} ms at "
        f"~{tokens:,.0f} tokens; {slow} − {fast} per pair: {ab.interval()}"
    )
    return _Measured(ab, fact, slow, fast)


def measured_saving_ms(run: Run) -> float | None:
    """The TTFT ids (or the gateway) measurably saved in ``run``: the paired difference's
    median where its interval decides that they help (:mod:`ttftscope.doctor.abtest`).

    >>> measured_saving_ms(Run(kind="probe", key="k", label="p", parts=())) is None
    True
    """
    found = _measured(run)
    return found.ab.median_ms if found is not None and found.ab.verdict == "helps" else None


def _undecided(run: Run, s: _Series, m: _Measured, share: float, where: str) -> Finding:
    """The front end is large, but the A/B cannot yet say whether the remedy helps."""
    flag = "--ab ids" if m.fast == "ids" else "--gateway-url URL"
    return Finding(
        id="tokenization-bound",
        severity="info",
        title=f"TTFT is {share:.0%} {where} ({s.name}); whether {m.fast} help is not decided",
        evidence=[Evidence(fact=m.fact, source=_source(run, s))],
        remedy=repeat_step(f"ttftscope probe {flag}", m.ab.repeat_needed or MIN_PAIRS)
        + f" (decides whether {m.fast} save more than {m.ab.min_effect_ms:,.0f} ms)",
    )


def _source(run: Run, s: _Series) -> str:
    return f"{', '.join(str(p) for p in run.sources)} ({s.name}, {len(s.records)} requests)"


def _facts(
    s: _Series, part: str, where: str, value: float, ttft: float, tokens: float
) -> list[str]:
    facts = [
        f"{where} {value:.0f} ms of {ttft:.0f} ms median TTFT ({value / ttft:.0%}) "
        f"at ~{tokens:,.0f} prompt tokens"
    ]
    fit = _fit(s.records, part)
    if fit is not None and fit_holds(fit, value, tokens):
        facts.append(f"grows {fit.slope:.2f} ms per 1K tokens (line fit, r² {fit.r2:.2f})")
    rate = hit_rate(s.records)
    if rate is not None:
        facts.append(f"prefix-cache hit rate {rate:.2f}: the cache cannot help with this part")
    return facts


@dataclass(frozen=True)
class _Part:
    """Which field holds the tokenization time, and whether the server measured it."""

    field: str
    value: float | None
    measured: bool  # the server's own render time, not the front end's remainder


def _part(top: Sequence[RequestRecord], part: str) -> _Part:
    """The server's measured render time where its records have it (vLLM 0.34+), else the
    front end's remainder; the client's own tokenization as timed."""
    if part == "server_frontend_ms":
        rendered = [r.server_render_ms for r in top if r.server_render_ms is not None]
        if rendered:
            return _Part("server_render_ms", median(rendered), measured=True)
    return _Part(part, median(getattr(r, part) for r in top), measured=part == "tokenize_ms")


def _finding_for(run: Run, s: _Series, part: str, where: str) -> Finding | None:
    top = _largest(s.records)
    found = _part(top, part)
    value, part = found.value, found.field
    ttft = median(r.client_ttft_ms for r in top)
    tokens = median(_tokens(r) for r in top) or 0.0
    if value is None or not ttft or value < MIN_FRONTEND_MS:
        return None
    server = part != "tokenize_ms"
    gateway = server and _via_gateway(s.name)
    # text vs ids measures what ids remove from the server's front end, not the client's own
    # tokenization: stated for the client part it gave both findings the same saving
    m = _measured(run) if server and not gateway else None
    if m is not None and m.ab.verdict != "helps":  # the A/B, not the share, decides
        undecided = m.ab.verdict == "not decided" and value / ttft >= MIN_SHARE
        return _undecided(run, s, m, value / ttft, where) if undecided else None
    if len(top) < MIN_PAIRS:
        return None  # the median of a stall or two: not a sustained part
    if value / ttft < MIN_SHARE and (m is None or m.ab.median_ms < MIN_SAVING_MS):
        return None
    facts = _facts(s, part, where, value, ttft, tokens) + ([m.fact] if m is not None else [])
    if server:
        facts.append(_RENDER_MEASURED if found.measured else _RENDER_ESTIMATED)
    fit = _fit(s.records, part)
    grows = " and grows with context" if fit and fit_holds(fit, value, tokens) else ""
    return Finding(
        id="tokenization-bound",
        severity="warning",
        title=f"TTFT is {value / ttft:.0%} {where}{' even through the gateway' * gateway} "
        f"({s.name}){grows}",
        evidence=[Evidence(fact=f, source=_source(run, s)) for f in facts],
        remedy=_GATEWAY_REMEDY if gateway else _remedy(part),
        saving_ms=round(m.ab.median_ms if m is not None else value, 1),
        part_ms=value,
    )


_RENDER_MEASURED = (
    "rendering + tokenization as the server measured it (vllm:request_render_duration_seconds"
    ", vLLM 0.34+): the saving is measured, not estimated"
)
_RENDER_ESTIMATED = (
    "the saving is estimated: the server does not export its render time (vLLM 0.34+ does), "
    "so its front end (server TTFT − queue − prefill, IPC included) stands for rendering + "
    "tokenization"
)


def _remedy(part: str) -> str:
    if part == "tokenize_ms":
        return (
            "tokenize incrementally on the client (ttftscope.ChatSession / "
            "IncrementalEncoder) and send the ids, or let the gateway do it"
        )
    return IDS_REMEDY


def _gateway_saving(run: Run, figures: ServerFigures) -> tuple[float, str] | None:
    """Median TTFT of the server's targets sent as text less that of those through the
    gateway (their whole runs): what ids measurably saved the text traffic."""
    series = {s.name: s.records for s in split_series(run) if s.name in figures.targets}
    text = [r.client_ttft_ms for n, rs in series.items() if not _via_gateway(n) for r in rs]
    ids = [r.client_ttft_ms for n, rs in series.items() if _via_gateway(n) for r in rs]
    a, b = median(text), median(ids)
    if a is None or b is None:
        return None
    slow = " + ".join(n for n in series if not _via_gateway(n))
    fast = " + ".join(n for n in series if _via_gateway(n))
    return a - b, f"median TTFT {slow} {a:,.0f} ms vs {fast} {b:,.0f} ms over the whole run"


def _server_finding(run: Run, figures: ServerFigures) -> Finding | None:
    """One server's run-wide means, judged for the traffic they are about.

    A server that only gateway traffic reaches points at the gateway; one that only text
    traffic reaches is judged on its front end. A server both reach mixes them: its mean is
    nobody's, so the measured difference between the two is the evidence, stated for the
    traffic sent as text (the gateway's own requests are not what ids would save on).
    """
    found = figures.breakdown
    value = None if found is None else found.part("server_frontend")
    if found is None or value is None or value < MIN_FRONTEND_MS or found.ttft_ms <= 0:
        return None
    share = value / found.ttft_ms
    names = list(figures.targets) or ["the run"]
    text = [n for n in names if not _via_gateway(n)]
    mixed = bool(text) and len(text) < len(names)
    saving = _gateway_saving(run, figures) if mixed else None
    if mixed and (saving is None or saving[0] < MIN_SAVING_MS):
        return None  # what the gateway saved here was measured: too little to advise it
    if not mixed and share < MIN_SHARE:
        return None
    one = "one server" if figures.shared else "its server"
    facts = [
        f"server front end {value:,.0f} ms of {found.ttft_ms:,.0f} ms mean TTFT ({share:.0%}) "
        f"over {found.n} requests of {figures.name}, from {one}'s histograms"
    ]
    if saving is not None:
        facts.append(saving[1])
    if figures.others >= 1:
        facts.append(
            f"its histograms also count {figures.others:,.0f} requests this run did not send"
        )
    who = " + ".join(text) if mixed else figures.name
    title = (
        f"TTFT is {share:.0%} server front end (rendering + tokenization) "
        f"({who}, run-wide server histograms)"
        if saving is None
        else f"TTFT of {who} is {saving[0]:,.0f} ms slower sent as text than as ids through "
        "the gateway (measured over the whole run)"
    )
    return Finding(
        id="tokenization-bound",
        severity="warning",
        title=title,
        evidence=[Evidence(fact=f, source=_where(run)) for f in facts],
        remedy=IDS_REMEDY if text else _GATEWAY_REMEDY,
        saving_ms=round(saving[0] if saving is not None else value, 1) if text else None,
        part_ms=None if mixed else value,  # a mixed mean is not the text traffic's own part
    )


def _where(run: Run) -> str:
    return ", ".join(str(p) for p in run.sources)


def _histogram_findings(run: Run) -> list[Finding]:
    """A bench run without per-request server parts: each server's run-wide means."""
    series = split_series(run)
    if run.kind != "bench" or any(records_breakdown(list(s.records)) is not None for s in series):
        return []
    return [f for figures in server_figures(run) if (f := _server_finding(run, figures))]


def server_tokenization_findings(run: Run) -> list[Finding]:
    """The worst series the server tokenizes, and any sent through the gateway that still
    dominates; a bench without per-request parts: its run-wide histograms. A probe's direct
    series is the arm of its gateway A/B, the requests of its chat series sent between the
    gateway's: the chat series is judged, the A/B is the gateway's statement."""
    out: list[Finding] = []
    series = _series(run)
    server = [
        f
        for s in series
        if s.name in _SERVER_TOKENIZES
        and not (run.kind == "probe" and s.name == "direct")  # an A/B arm: chat's requests
        and (f := _finding_for(run, s, "server_frontend_ms", "server-side tokenization"))
    ]
    if server:
        out.append(max(server, key=lambda f: f.saving_ms or 0.0))
    out += [
        f
        for s in series
        if _via_gateway(s.name)
        and (f := _finding_for(run, s, "server_frontend_ms", "server-side tokenization"))
    ]
    return out + _histogram_findings(run)


def _with_client_work(r: RequestRecord) -> RequestRecord:
    """The record with its client TTFT counting its client tokenization.

    The probe tokenizes before it sends, so its client TTFT holds the tokenization already;
    ``instrument`` times it off the call, beside a TTFT that does not: a client that
    tokenizes waits for both.
    """
    tok, ttft, wire = r.tokenize_ms, r.client_ttft_ms, r.wire_ttft_ms
    if tok is None or ttft is None or wire is None or ttft - wire >= tok:
        return r
    return r.model_copy(update={"client_ttft_ms": ttft + tok})


def client_tokenization_findings(run: Run) -> list[Finding]:
    """Series whose client-side tokenization dominates TTFT and grows with context.

    Client tokenization ttftscope did itself (its probe's, the live doctor's) is left out:
    it is not the user's client's.
    """
    where = "client-side tokenization"
    out: list[Finding] = []
    for s in _series(run):
        theirs = [_with_client_work(r) for r in s.records if not r.ttftscopes_own]
        found = _finding_for(run, _Series(s.name, theirs), "tokenize_ms", where) if theirs else None
        out += [found] if found is not None else []
    return out
