"""What the doctor says: findings with evidence, a remedy and the TTFT they would save.

A finding is one diagnosis with the numbers behind it and where they came from, so a reader
can check it; the remedy is a command or a setting, not advice. The exit code gates a
pipeline: any warning or worse makes it non-zero.

The doctor's rules are the only place findings are made; this model sits below the
capabilities so that ``report`` can render a diagnosis (terminal and HTML page) that the
CLI had the doctor make.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field, model_validator

__all__ = ["Diagnosis", "Evidence", "Finding", "FindingId", "Severity"]

Severity = Literal["info", "warning", "critical"]
FindingId = Literal[
    "dynamic-prefix",
    "tokenization-bound",
    "queueing",
    "config-not-applied",
    "inexact-token-ids",
    "non-ascii-slow-path",
    "rate-limited",
    "prefix-cache-off",
    "network-path",
    "shared-server",
    "prefill-bound",
]
_RANK: dict[Severity, int] = {"info": 0, "warning": 1, "critical": 2}


class Evidence(BaseModel):
    """One measured fact and where it came from.

    >>> Evidence(fact="hit rate 0.98", source="probe-1.jsonl (12 requests)").source
    'probe-1.jsonl (12 requests)'
    """

    fact: str
    source: str


class Finding(BaseModel):
    """One diagnosis: what is wrong, the evidence, what to do, and what it would save.

    >>> f = Finding(id="queueing", severity="warning", title="requests wait",
    ...             evidence=[], remedy="raise --max-num-seqs")
    >>> f.gates
    True
    """

    id: FindingId
    severity: Severity
    title: str
    evidence: list[Evidence] = Field(default_factory=list)
    remedy: str
    saving_ms: float | None = None  # estimated TTFT saved per request, where it can be
    # the measured part the remedy removes (ms): a saving never exceeds it (clamped here, the
    # one place, whichever estimate a rule made)
    part_ms: float | None = None

    @model_validator(mode="after")
    def _saving_within_part(self) -> Finding:
        """Clamp ``saving_ms`` to ``part_ms`` (not rounded here: a saving rounded up past its
        part would exceed it, and one rounded twice would read otherwise than its evidence).

        >>> Finding(id="queueing", severity="info", title="t", remedy="r", saving_ms=142.0,
        ...         part_ms=26.0).saving_ms
        26.0
        >>> Finding(id="queueing", severity="info", title="t", remedy="r", saving_ms=2.8,
        ...         part_ms=2.75).saving_ms
        2.75
        """
        if self.saving_ms is not None and self.part_ms is not None:
            self.saving_ms = min(self.saving_ms, self.part_ms)
        return self

    @property
    def gates(self) -> bool:
        """Whether this finding makes ``doctor`` exit non-zero (a warning or worse)."""
        return _RANK[self.severity] >= _RANK["warning"]


class Diagnosis(BaseModel):
    """Every finding of one doctor run, worst first, and what was looked at.

    >>> Diagnosis(findings=[], checked=["config"]).exit_code
    0
    """

    findings: list[Finding] = Field(default_factory=list)
    checked: list[str] = Field(default_factory=list)  # what the doctor looked at
    notes: list[str] = Field(default_factory=list)  # what it could not look at, and why

    @classmethod
    def of(
        cls, findings: Iterable[Finding], checked: Iterable[str], notes: Iterable[str] = ()
    ) -> Diagnosis:
        """Findings sorted worst first (then by saving), the rest as given.

        >>> f = Finding(id="queueing", severity="info", title="t", remedy="r")
        >>> g = f.model_copy(update={"severity": "critical"})
        >>> [x.severity for x in Diagnosis.of([f, g], []).findings]
        ['critical', 'info']
        """
        ranked = sorted(findings, key=lambda f: (-_RANK[f.severity], -(f.saving_ms or 0.0)))
        return cls(findings=ranked, checked=list(checked), notes=list(notes))

    @property
    def exit_code(self) -> int:
        """0 when healthy or only informational; 1 when any finding is a warning or worse."""
        return 1 if any(f.gates for f in self.findings) else 0

    def verdict(self) -> str:
        """One paragraph: the finding that leads, what to do and what it saves, and how many
        more there are; or that nothing was found.

        >>> f = Finding(id="queueing", severity="warning", title="requests wait",
        ...             remedy="add a replica", saving_ms=300.0)
        >>> print(Diagnosis.of([f], []).verdict())  # doctest: +NORMALIZE_WHITESPACE
        The main bottleneck: requests wait (queueing). Do this: add a replica; it saves
        ~300 ms per request. Nothing else rises above info.
        >>> Diagnosis().verdict()
        '✓ no problem found in what was checked.'
        """
        gating = [f for f in self.findings if f.gates]
        info = len(self.findings) - len(gating)
        below = f" ({info} informational finding{'s' * (info != 1)} below)" if info else ""
        if not gating:
            return f"✓ no problem found in what was checked{below}."
        lead = gating[0]
        save = f"; it saves ~{lead.saving_ms:,.0f} ms per request" if lead.saving_ms else ""
        rest = len(gating) - 1
        more = (
            f" {rest} more warning{'s' * (rest != 1)} below{below}."
            if rest
            else f" Nothing else rises above info{below}."
        )
        return (
            f"The main bottleneck: {lead.title} ({lead.id}). Do this: "
            f"{lead.remedy.rstrip('.')}{save}.{more}"
        )

    @property
    def healthy(self) -> bool:
        """Whether nothing rose to a warning."""
        return self.exit_code == 0
