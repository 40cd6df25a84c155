"""One story out of the rules' findings: one finding per remedy, ranked by measured saving.

Rules judge one series or run at a time, so the same remedy can come back several times (the
gateway's hop in three runs, prefill missing the cache in two). A reader should meet each
remedy once: the findings that share one become the one with the largest saving (then the
worst severity), with every other's evidence kept under it and its series named in the
title. :meth:`~ttftscope.findings.Diagnosis.of` then ranks them, worst first, then by saving.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.findings import Finding

__all__ = ["one_per_remedy"]

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
