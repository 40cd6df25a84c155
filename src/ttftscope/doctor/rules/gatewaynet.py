"""One statement for the gateway: what its ids save against what its own hop costs.

Where a run measured one workload both direct and through the ttftscope gateway, two rules
pull different ways about one choice: server-side tokenization advises "send token ids (run
the gateway)" with what ids save, and the network path finds the gateway's series spending
more outside the server (the gateway's own hop). They become one statement, pair by pair (a
probe's k-th direct and gateway request at its largest context; a bench's turns of one
session in one round of its targets, to which bench deals a session's turns in turn): the
part ids remove (the server front end, direct − gateway), the hop's cost (outside the
server, gateway − direct) and the net, direct TTFT − gateway TTFT, which is that saving less
that cost as measured, each with its 95% interval. The net's paired verdict
(:mod:`ttftscope.doctor.abtest`) decides what is said: the gateway helps (its saving is the
net), costs (its hop is longer than what its ids save), or is not decided yet; the findings
it reconciles are folded in as evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ttftscope.doctor.abtest import PairedAB, paired_ab, repeat_step
from ttftscope.doctor.rules.path import GATEWAY_PATH_REMEDIES, VIA_GATEWAY
from ttftscope.doctor.rules.tokenize import IDS_REMEDY
from ttftscope.findings import Evidence, Finding
from ttftscope.records import RequestRecord
from ttftscope.results.parts import latency_samples, part_ms
from ttftscope.results.runs import Run
from ttftscope.stats import median

__all__ = ["gateway_statement", "reconciled"]

_Pair = tuple[RequestRecord, RequestRecord]  # (direct, gateway)


def _order(r: RequestRecord) -> int:
    return r.index


def _bench_pairs(direct: list[RequestRecord], gateway: list[RequestRecord], n: int) -> list[_Pair]:
    """Bench deals a session's turns to its ``n`` targets in turn: turns ``k·n`` to
    ``k·n + n − 1`` of one session are one round, each target's turn of it a pair member."""
    rounds: dict[tuple[int, int], tuple[list[RequestRecord], list[RequestRecord]]] = {}
    for side, records in enumerate((direct, gateway)):
        for r in records:
            if r.session is not None and r.turn is not None:
                rounds.setdefault((r.session, r.turn // n), ([], []))[side].append(r)
    return [
        pair
        for d, g in rounds.values()
        for pair in zip(sorted(d, key=_order), sorted(g, key=_order), strict=False)
    ]


def _pairs(run: Run) -> list[_Pair]:
    """Direct and gateway requests of the same prompt: a bench's session and turn, else a
    probe's k-th of each at its largest context."""
    ok = [r for r in latency_samples(run.records, run.kind) if r.client_ttft_ms is not None]
    direct = [r for r in ok if (r.target or r.variant) == "direct" and r.gateway_ms is None]
    # as the network path tells: a series named for the gateway, or records it stamped
    gateway = [r for r in ok if "gateway" in (r.target or r.variant) or r.gateway_ms is not None]
    if not direct or not gateway:
        return []
    if run.kind == "bench":
        return _bench_pairs(direct, gateway, max(len({r.target for r in ok}), 1))
    top = max(r.context_tokens_target for r in direct)
    ds = sorted((r for r in direct if r.context_tokens_target == top), key=_order)
    gs = sorted((r for r in gateway if r.context_tokens_target == top), key=_order)
    return list(zip(ds, gs, strict=False))


def _diffs(pairs: Sequence[_Pair], of: Callable[[RequestRecord], float | None]) -> list[float]:
    """direct − gateway of ``of``, over the pairs that have it on both sides."""
    out = []
    for d, g in pairs:
        a, b = of(d), of(g)
        if a is not None and b is not None:
            out.append(a - b)
    return out


def _front(r: RequestRecord) -> float | None:
    return r.server_frontend_ms


def _outside(r: RequestRecord) -> float | None:
    return part_ms(r, "outside_server")


@dataclass(frozen=True)
class _Net:
    """The net (direct − gateway TTFT, judged both ways), what ids save and the hop costs."""

    helps: PairedAB  # direct − gateway
    costs: PairedAB  # gateway − direct
    saved: PairedAB | None
    hop: PairedAB | None

    def facts(self) -> list[str]:
        out = [f"direct − gateway TTFT per pair (the net): {self.helps.interval()}"]
        if self.saved is not None:
            out.append(
                f"server front end direct − gateway (what ids remove): {self.saved.interval()}"
            )
        if self.hop is not None:
            out.append(
                f"outside the server gateway − direct (the gateway's hop): {self.hop.interval()}"
            )
        return out

    def said(self) -> str:
        """The two parts in words, each the way its sign points."""
        parts = []
        if self.saved is not None:
            x = self.saved.median_ms
            parts.append(
                f"ids save {x:,.0f} ms of server front end"
                if x >= 0
                else f"its server front end is {-x:,.0f} ms longer than direct's"
            )
        if self.hop is not None:
            h = self.hop.median_ms
            parts.append(
                f"its own hop costs {h:,.0f} ms"
                if h >= 0
                else f"its path is {-h:,.0f} ms shorter than direct's"
            )
        return f": {', '.join(parts)}" if parts else ""


def _one_sided(diffs: list[float]) -> PairedAB | None:
    return paired_ab(diffs, [0.0] * len(diffs)) if diffs else None


def _net(pairs: Sequence[_Pair]) -> _Net:
    d = [r.client_ttft_ms or 0.0 for r, _ in pairs]
    g = [r.client_ttft_ms or 0.0 for _, r in pairs]
    hop = [-x for x in _diffs(pairs, _outside)]
    return _Net(
        paired_ab(d, g), paired_ab(g, d), _one_sided(_diffs(pairs, _front)), _one_sided(hop)
    )


def gateway_statement(run: Run) -> Finding | None:
    """The gateway's net effect in ``run``, where it measured direct and gateway pairs.

    >>> gateway_statement(Run(kind="probe", key="k", label="p", parts=())) is None
    True
    """
    pairs = _pairs(run)
    if not pairs:
        return None
    net = _net(pairs)
    source = f"{', '.join(str(p) for p in run.sources)} (direct and gateway, {len(pairs)} pairs)"
    evidence = [Evidence(fact=f, source=source) for f in net.facts()]
    front = median(_front(d) for d, _ in pairs)
    if net.helps.verdict == "helps":
        return _helps(net, evidence, front)
    if net.costs.verdict == "helps":
        return Finding(
            id="network-path",
            severity="warning",
            title=f"through the gateway TTFT is {net.costs.median_ms:,.0f} ms longer than "
            f"direct{net.said()}",
            evidence=evidence,
            remedy=VIA_GATEWAY,
            saving_ms=net.costs.median_ms,  # as the evidence quotes it: one figure
            part_ms=None if net.hop is None else net.hop.median_ms,
        )
    return _undecided(net, evidence)


def _helps(net: _Net, evidence: list[Evidence], front: float | None) -> Finding:
    hop = net.hop.median_ms if net.hop is not None else 0.0
    # the saving is already net of the hop: said, not advised away (it may run on the host)
    shorter = f" (the saving is net of its own hop, ~{hop:,.0f} ms here)" if hop >= 1 else ""
    return Finding(
        id="tokenization-bound",
        severity="warning",
        title=f"through the gateway TTFT is {net.helps.median_ms:,.0f} ms shorter than "
        f"direct{net.said()}",
        evidence=evidence,
        remedy=IDS_REMEDY + shorter,
        saving_ms=net.helps.median_ms,  # as the evidence quotes it: one figure
        part_ms=front,  # ids remove at most the server's front end
    )


def _undecided(net: _Net, evidence: list[Evidence]) -> Finding:
    if net.helps.verdict == "not decided" or net.costs.verdict == "not decided":
        n = max(net.helps.repeat_needed or 0, net.costs.repeat_needed or 0)
        what, remedy = (
            "not decided",
            repeat_step("ttftscope probe --gateway-url URL", n),
        )
    else:
        what = "no net difference"
        remedy = "nothing to change: through the gateway, its own hop included, TTFT is as direct"
    return Finding(
        id="network-path",
        severity="info",
        title=f"through the gateway vs direct: {what}{net.said()}",
        evidence=evidence,
        remedy=remedy,
    )


def _pulls(f: Finding) -> bool:
    """A finding the gateway's statement answers: ids advised (or not yet decided), or the
    gateway's own path."""
    if f.id == "tokenization-bound":
        return f.remedy == IDS_REMEDY or "--gateway-url" in f.remedy
    return f.id == "network-path" and f.remedy in GATEWAY_PATH_REMEDIES


def reconciled(run: Run, findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` of ``run`` with those about the gateway made one statement (their
    evidence under it), where the run measured direct and gateway pairs."""
    statement = gateway_statement(run)
    if statement is None:
        return list(findings)
    folded = [e for f in findings if _pulls(f) for e in f.evidence]
    merged = statement.model_copy(update={"evidence": statement.evidence + folded})
    return [merged, *(f for f in findings if not _pulls(f))]
