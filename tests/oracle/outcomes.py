"""What happened to each (version, API, body): the oracle's verdicts, a mismatch's description,
the summary table and its JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from ttftscope.tokenization.loader import Tokenizer

Verdict = Literal[
    "equal",  # both rendered; the gateway's ids are vLLM's
    "mismatch",  # both rendered; the ids differ
    "passed_through",  # vLLM rendered; the gateway sends it as text
    "rejected_passed_through",  # vLLM rejected; the gateway sends it as text (vLLM answers)
    "rejected_but_ids",  # vLLM rejected; the gateway would send ids
]
CONTEXT = 6  # tokens shown on each side of a first difference


@dataclass(frozen=True)
class Outcome:
    version: str
    api: str
    name: str
    verdict: Verdict
    why: str = ""  # a pass-through's reason, vLLM's status
    detail: str = ""  # a mismatch's first difference


@dataclass
class Report:
    """Every outcome of the run, the servers' facts, and where the JSON goes."""

    outcomes: list[Outcome] = field(default_factory=list)
    servers: dict[str, dict[str, object]] = field(default_factory=dict)

    def table(self) -> list[str]:
        """One line per (version, API): bodies, as ids, equal, passed through and why."""
        keys = sorted({(o.version, o.api) for o in self.outcomes})
        head = f"{'version':8} {'api':10} {'bodies':>6} {'as ids':>6} {'equal':>6}  text (why)"
        lines = [head]
        for version, api in keys:
            mine = [o for o in self.outcomes if (o.version, o.api) == (version, api)]
            n = Counter(o.verdict for o in mine)
            as_ids = n["equal"] + n["mismatch"] + n["rejected_but_ids"]
            why = Counter(
                f"{o.why}{' (vLLM rejects)' if o.verdict.startswith('rejected') else ''}"
                for o in mine
                if o.verdict in ("passed_through", "rejected_passed_through")
            )
            text = ", ".join(f"{k} {v}" for k, v in sorted(why.items())) or "-"
            lines.append(f"{version:8} {api:10} {len(mine):6} {as_ids:6} {n['equal']:6}  {text}")
        return lines

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.verdict in ("mismatch", "rejected_but_ids")]

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "servers": self.servers,
            "table": self.table(),
            "outcomes": [asdict(o) for o in self.outcomes],
        }
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")


REPORT = Report()  # this run's outcomes, filled by the tests, printed and written at the end


def first_difference(ours: Sequence[int], theirs: Sequence[int]) -> int | None:
    """The first index where the id lists differ (the shorter one's length if one is a prefix).

    >>> first_difference([1, 2, 3], [1, 2, 4]), first_difference([1], [1, 2])
    (2, 1)
    >>> first_difference([1], [1]) is None
    True
    """
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return i
    return None if len(ours) == len(theirs) else min(len(ours), len(theirs))


def describe(tok: Tokenizer, ours: Sequence[int], theirs: Sequence[int], at: int) -> str:
    """Where two id lists part: the index, both tokens, and both sides' text around it."""
    lo = max(0, at - CONTEXT)

    def side(ids: Sequence[int]) -> str:
        token = ids[at] if at < len(ids) else "end"
        before, after = tok.decode(ids[lo:at]), tok.decode(ids[at : at + CONTEXT])
        return f"token {token}: {before!r} ‖ {after!r}"

    return (
        f"first difference at token {at} (gateway {len(ours)} ids, vLLM {len(theirs)}): "
        f"gateway {side(ours)}; vLLM {side(theirs)}"
    )
