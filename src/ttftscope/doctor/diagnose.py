"""The doctor's rules over what was gathered: one :class:`~.findings.Diagnosis`.

>>> from ttftscope.config.loader import load_settings
>>> d = diagnose(Inputs(loaded=load_settings(env={}, cwd=Path("/nonexistent")),
...                     cwd=Path("/nonexistent")))
>>> d.healthy, d.checked
(True, ['configuration'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ttftscope.config.loader import LoadedSettings
from ttftscope.doctor.findings import Diagnosis, Finding
from ttftscope.doctor.gather import Live, Recorded
from ttftscope.doctor.rules_config import ConfigContext, config_findings
from ttftscope.doctor.rules_server import cache_findings, queue_findings, rate_limit_findings
from ttftscope.doctor.rules_text import TextEvidence, text_findings
from ttftscope.doctor.rules_tokenize import tokenization_findings
from ttftscope.tokenization.loader import Tokenizer

__all__ = ["Inputs", "diagnose"]


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
    findings: list[Finding] = [
        *config_findings(ctx),
        *tokenization_findings(runs),
        *queue_findings(runs),
        *rate_limit_findings(runs),
        *cache_findings(runs, live.server),
        *text_findings(text, live.gateway),
    ]
    notes = [*inputs.recorded.notes, *live.notes, *text.notes]
    return Diagnosis.of(findings, _checked(inputs), notes)
