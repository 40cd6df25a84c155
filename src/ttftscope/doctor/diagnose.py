"""The doctor's rules over what was gathered: one :class:`~ttftscope.findings.Diagnosis`.

The only place advice is made: ``doctor`` prints it, ``report`` renders it beside its plots
(the CLI composes the two). Advice must not contradict itself: while a run's requests queue,
its server front end (which then holds waiting inside the API server too) is not called
tokenization, since the queue's remedy says ids will not help; unless the run measured what
ids save, and then the queue's remedy stops saying so. A queue seen live (``/metrics``
sampled for a few seconds) and one seen in the records are one ``queueing`` finding.

>>> from ttftscope.config.loader import load_settings
>>> d = diagnose(Inputs(loaded=load_settings(env={}, cwd=Path("/nonexistent")),
...                     cwd=Path("/nonexistent")))
>>> d.healthy, d.checked
(True, ['configuration'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ttftscope.config.loader import LoadedSettings
from ttftscope.doctor.gather import Live, Recorded
from ttftscope.doctor.rules.config import ConfigContext, config_findings
from ttftscope.doctor.rules.gatewaynet import reconciled
from ttftscope.doctor.rules.livequeue import MIN_SAMPLES, STAYS_SHARE, live_queue_findings
from ttftscope.doctor.rules.nonascii import slow_path_findings
from ttftscope.doctor.rules.path import network_findings
from ttftscope.doctor.rules.prefill import cache_findings, prefill_findings
from ttftscope.doctor.rules.server import (
    NOT_TOKENIZATION,
    queue_findings,
    rate_limit_findings,
    shared_server_findings,
)
from ttftscope.doctor.rules.text import TextEvidence, text_findings
from ttftscope.doctor.rules.tokenize import (
    MIN_SAVING_MS,
    client_tokenization_findings,
    measured_saving_ms,
    server_tokenization_findings,
)
from ttftscope.doctor.serverfacts import ServerFacts
from ttftscope.doctor.story import one_story
from ttftscope.findings import Diagnosis, Finding
from ttftscope.results.parts import records_breakdown, summary_breakdown
from ttftscope.results.runs import Run
from ttftscope.tokenization.loader import Tokenizer

__all__ = ["Inputs", "diagnose", "diagnose_runs"]


@dataclass
class Inputs:
    """Everything the rules read; each part may be missing (then its rules stay quiet)."""

    loaded: LoadedSettings
    cwd: Path
    recorded: Recorded = field(default_factory=Recorded)
    live: Live | None = None
    tokenizer: Tokenizer | None = None


def _checked(inputs: Inputs) -> list[str]:
    out = ["configuration"]
    runs = inputs.recorded.runs
    if runs:
        n = sum(len(r.records) for r in runs)
        out.append(f"{len(runs)} run(s), {n} request records")
    if inputs.recorded.request_logs:
        out.append(f"{len(inputs.recorded.request_logs)} request log(s)")
    if inputs.live is not None:
        out += inputs.live.checked
    return out


def _run_notes(run: Run) -> list[str]:
    """What the rules could not judge in one run, and why."""
    measured = [r for r in run.records if r.phase != "warmup"]
    if measured and not any(r.ok for r in measured):
        return [f"{run.label}: no successful request to measure; see the failures"]
    if (
        records_breakdown(list(run.records)) is None
        and summary_breakdown(run.bench_summaries) is None
    ):
        return [
            f"{run.label}: the records have no server-side parts (no per-request /metrics "
            "deltas): run `ttftscope probe` against this server to split TTFT"
        ]
    return []


def _without_contradiction(
    run: Run, notes: list[str], limit: int | None
) -> tuple[list[Finding], list[Finding]]:
    """A run's queueing and server front-end findings, made to agree.

    Under load the front end also holds waiting inside the API server, so beside a queue it
    is not called tokenization, unless ids measurably saved TTFT in this run: then both
    stand, and the queue's remedy no longer says ids will not help.
    """
    queued = queue_findings([run], limit)
    front = server_tokenization_findings(run)
    if not (queued and front):
        return queued, front
    if (measured_saving_ms(run) or 0.0) >= MIN_SAVING_MS:
        return [
            q.model_copy(update={"remedy": q.remedy.removeprefix(NOT_TOKENIZATION)}) for q in queued
        ], front
    notes.append(
        f"{run.label}: the server front end is not judged as tokenization while requests "
        "queue (under load it holds waiting inside the API server too)"
    )
    return queued, []


def diagnose_runs(
    runs: Sequence[Run], server: ServerFacts | None = None
) -> tuple[list[Finding], list[str]]:
    """The rules that read runs: findings, and notes on what could not be judged.

    >>> diagnose_runs([])
    ([], [])
    """
    findings: list[Finding] = []
    notes: list[str] = []
    limit = server.max_num_seqs if server is not None else None
    for run in runs:
        queued, front = _without_contradiction(run, notes, limit)
        mine = [*front, *client_tokenization_findings(run), *slow_path_findings(run), *queued]
        findings += reconciled(run, [*mine, *network_findings([run])])
        notes += _run_notes(run)
    findings += [
        *rate_limit_findings(runs),
        *shared_server_findings(runs),
        *cache_findings(runs, server),
        *prefill_findings(runs),
    ]
    return findings, notes


def _live_queue_notes(live: Live) -> list[str]:
    """Why a queue the live scrapes glimpsed was not called queueing."""
    s, server = live.samples, live.server
    if s is None:
        waiting = server.waiting if server is not None else None
        if not waiting:
            return []
        return [
            f"one /metrics scrape showed {waiting:.0f} waiting: sample the queue over a "
            "window (--sample-seconds) to judge it"
        ]
    above = sum(1 for w in s.waiting if w > 0)
    if not above or (s.waited_share >= STAYS_SHARE and len(s.waiting) >= MIN_SAMPLES):
        return []
    return [
        f"waiting was above 0 in {above} of {len(s.waiting)} /metrics scrapes: a queue is "
        f"called when it stays (above 0 in at least {STAYS_SHARE:.0%} of {MIN_SAMPLES} or "
        "more scrapes)"
    ]


def _with_live_queue(findings: list[Finding], live: Live) -> list[Finding]:
    """One ``queueing`` finding: the records' (with the live evidence added), else the live."""
    found = live_queue_findings(live.samples, live.server)
    if not found:
        return findings
    at = next((i for i, f in enumerate(findings) if f.id == "queueing"), None)
    if at is None:
        return [*findings, *found]
    merged = findings[at].evidence + found[0].evidence
    return [
        *findings[:at],
        findings[at].model_copy(update={"evidence": merged}),
        *findings[at + 1 :],
    ]


def diagnose(inputs: Inputs) -> Diagnosis:
    """Run every rule; findings worst first; notes say what could not be looked at."""
    live = inputs.live or Live()
    runs = inputs.recorded.runs
    ctx = ConfigContext(
        inputs.loaded,
        inputs.cwd,
        served_models=live.served_models,
        metrics_models=live.server.models if live.server is not None else None,
    )
    block = live.server.block_size if live.server is not None else None
    text = TextEvidence(
        logs=inputs.recorded.request_logs, tokenizer=inputs.tokenizer, block_size=block
    )
    from_runs, run_notes = diagnose_runs(runs, live.server)
    findings: list[Finding] = [
        *config_findings(ctx),
        *_with_live_queue(from_runs, live),
        *text_findings(text, live.gateway),
    ]
    notes = [
        *inputs.recorded.notes,
        *run_notes,
        *live.notes,
        *_live_queue_notes(live),
        *text.notes,
    ]
    return Diagnosis.of(one_story(findings), _checked(inputs), notes)
