"""One story out of the rules' findings: one finding per remedy, ranked by measured saving.

Rules judge one series or run at a time, so the same remedy can come back several times (the
gateway's hop in three runs, prefill missing the cache in two). A reader should meet each
remedy once: the findings that share one become the one with the largest saving (then the
worst severity), with every other's evidence kept under it and its series named in the
title. A cause and its symptom are one statement too: prompts whose start changes (the
request logs' ``dynamic-prefix``) and the prefill that misses the cache because of it (the
records' ``prefix-cache-off``, with its measured saving) become the cause, carrying the
symptom's saving and evidence. :meth:`~ttftscope.findings.Diagnosis.of` then ranks them,
worst first, then by saving.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.findings import Finding

__all__ = ["one_per_remedy", "one_story"]

_RANK = {"info": 0, "warning": 1, "critical": 2}


def _key(f: Finding) -> tuple[int, float]:
    return _RANK[f.severity], f.saving_ms or 0.0


def _merged(group: Sequence[Finding]) -> Finding:
    lead = max(group, key=_key)
    others = [f for f in group if f is not lead]
    if not others:
        return lead
    evidence = lead.evidence + [e for f in others for e in f.evidence]
    more = f" (and {len(others)} more like it)"
    return lead.model_copy(update={"evidence": evidence, "title": lead.title + more})


def one_per_remedy(findings: Sequence[Finding]) -> list[Finding]:
    """The findings with each remedy once, in the order each remedy first appeared.

    >>> a = Finding(id="network-path", severity="warning", title="a", remedy="r", saving_ms=9)
    >>> b = a.model_copy(update={"title": "b", "saving_ms": 30.0})
    >>> [(f.title, f.saving_ms) for f in one_per_remedy([a, b])]
    [('b (and 1 more like it)', 30.0)]
    """
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.id, f.remedy), []).append(f)
    return [_merged(g) for g in groups.values()]


def _with_cause(findings: Sequence[Finding]) -> list[Finding]:
    """A measured cache miss folded into the dynamic prefix that causes it."""
    cause = next((f for f in findings if f.id == "dynamic-prefix"), None)
    missed = next(
        (f for f in findings if f.id == "prefix-cache-off" and f.saving_ms is not None), None
    )
    if cause is None or missed is None:
        return list(findings)
    merged = cause.model_copy(
        update={
            "evidence": cause.evidence + missed.evidence,
            "saving_ms": missed.saving_ms,
            "part_ms": missed.part_ms,
        }
    )
    return [merged if f is cause else f for f in findings if f is not missed]


def one_story(findings: Sequence[Finding]) -> list[Finding]:
    """Causes with their measured symptoms, then each remedy once."""
    return one_per_remedy(_with_cause(findings))
