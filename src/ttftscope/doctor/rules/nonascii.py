"""Finding: the server tokenizes non-ASCII prompts on a slow path.

A byte-level BPE meets non-ASCII text byte by byte, and some tokenizers fall to a slower
path for it: the same prompt costs the server's front end several times more per token in
another script. The probe's ``--non-ascii`` series (always in the live doctor's short probe)
sends its chat text again in non-ASCII letters, character for character, so the k-th warm
request of ``chat`` and of ``non_ascii`` at the largest context are a pair. Each pair's
difference is the non-ASCII request's tokenization less the ASCII one's scaled to the same
prompt tokens: what the slow path costs. The server's own render time is read where it is
recorded (vLLM 0.34+), else the front end's remainder, said to be an estimate; the paired
bootstrap of :mod:`ttftscope.doctor.abtest` decides whether the difference is real.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ttftscope.doctor.abtest import MIN_PAIRS, PairedAB, paired_ab, repeat_step
from ttftscope.doctor.rules.tokenize import MIN_SAVING_MS
from ttftscope.doctor.textspeed import SLOW_RATIO
from ttftscope.findings import Evidence, Finding
from ttftscope.records import RequestRecord
from ttftscope.results.parts import latency_samples
from ttftscope.results.runs import Run
from ttftscope.stats import median

__all__ = ["slow_path_findings"]

_REMEDY = (
    "send token ids so the server never tokenizes the text: run `ttftscope gateway "
    "--upstream URL --model-dir DIR` and point clients at it (it encodes a conversation once, "
    "incrementally); check the server uses its fast tokenizer (vLLM: not --tokenizer-mode slow)"
)
_Pair = tuple[RequestRecord, RequestRecord]


def _tokenization(r: RequestRecord) -> float | None:
    return r.server_render_ms if r.server_render_ms is not None else r.server_frontend_ms


def _pairs(run: Run) -> list[_Pair]:
    """(ASCII, non-ASCII): the k-th warm request of each at the largest non-ASCII context."""
    samples = latency_samples(run.records, run.kind)
    sizes = [r.context_tokens_target for r in samples if r.variant == "non_ascii"]
    if not sizes:
        return []

    def series(variant: str) -> list[RequestRecord]:
        top = [r for r in samples if r.variant == variant and r.context_tokens_target == max(sizes)]
        return sorted(top, key=lambda r: r.index)

    return [
        (a, w)
        for a, w in zip(series("chat"), series("non_ascii"), strict=False)
        if all(_tokenization(r) is not None and r.prompt_tokens for r in (a, w))
    ]


def _per_1k(r: RequestRecord) -> float:
    return (_tokenization(r) or 0.0) / (r.prompt_tokens or 1) * 1000.0


def _facts(pairs: Sequence[_Pair], ab: PairedAB, ratio: float) -> list[str]:
    wide = median(_tokenization(w) for _, w in pairs) or 0.0
    tokens = median(float(w.prompt_tokens or 0) for _, w in pairs) or 0.0
    rate_w, rate_a = median(_per_1k(w) for _, w in pairs), median(_per_1k(a) for a, _ in pairs)
    measured = all(r.server_render_ms is not None for pair in pairs for r in pair)
    return [
        f"non-ASCII prompts: tokenization {wide:,.0f} ms at ~{tokens:,.0f} tokens, "
        f"{rate_w:.2f} ms per 1K tokens against {rate_a:.2f} for the same text in ASCII "
        f"({ratio:.1f}×)",
        f"non-ASCII − ASCII at equal prompt tokens, per pair: {ab.interval()}",
        "from the server's render time (vllm:request_render_duration_seconds): measured"
        if measured
        else "from the server front end (server TTFT − queue − prefill): an estimate; vLLM "
        "0.34+ measures its render time",
    ]


def slow_path_findings(run: Run) -> list[Finding]:
    """A decided, material non-ASCII surcharge at least :data:`SLOW_RATIO` × per token (a
    warning, saving the surcharge); one the pairs cannot decide yet (info: the repeat count
    that would decide it).

    >>> slow_path_findings(Run(kind="probe", key="k", label="p", parts=()))
    []
    """
    pairs = _pairs(run)
    if not pairs:
        return []
    wide = [_tokenization(w) or 0.0 for _, w in pairs]
    scaled = [
        (_tokenization(a) or 0.0) * (w.prompt_tokens or 0) / (a.prompt_tokens or 1)
        for a, w in pairs
    ]
    ab = paired_ab(wide, scaled)
    rate_a = median(_per_1k(a) for a, _ in pairs) or 0.0
    ratio = (median(_per_1k(w) for _, w in pairs) or 0.0) / rate_a if rate_a > 0 else math.inf
    if ab.verdict == "does not help" or ratio < SLOW_RATIO or ab.median_ms < MIN_SAVING_MS:
        return []
    source = f"{', '.join(str(p) for p in run.sources)} (chat and non_ascii, {len(pairs)} pairs)"
    evidence = [Evidence(fact=f, source=source) for f in _facts(pairs, ab, ratio)]
    if ab.verdict == "not decided":
        return [_undecided(evidence, ab)]
    return [
        Finding(
            id="non-ascii-slow-path",
            severity="warning",
            title=f"non-ASCII prompts take a slow tokenization path on the server: {ratio:.1f}× "
            "the time per token of the same text in ASCII",
            evidence=evidence,
            remedy=_REMEDY,
            saving_ms=ab.median_ms,  # as the evidence quotes it: one figure
            part_ms=median(wide),
        )
    ]


def _undecided(evidence: list[Evidence], ab: PairedAB) -> Finding:
    """A surcharge the pairs cannot decide yet: the repeat count that would."""
    return Finding(
        id="non-ascii-slow-path",
        severity="info",
        title="non-ASCII prompts may take a slower tokenization path: not decided",
        evidence=evidence,
        remedy=repeat_step("ttftscope probe --non-ascii", ab.repeat_needed or MIN_PAIRS),
    )
