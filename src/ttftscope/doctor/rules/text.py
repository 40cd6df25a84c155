"""Findings from the request texts themselves: dynamic prefixes, inexact ids, non-ASCII input.

They read request logs (``requests.jsonl`` from ``instrument``, the gateway's request log,
bench replay files): the prompts as clients sent them. Ids a client computed are checked by
encoding the text they spell (their decode) exactly; a client that tokenized exactly gets
the same ids back. The gateway's own exactness counters come from its ``/metrics``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ttftscope.doctor.dynamic import common_prefix
from ttftscope.doctor.logged_bodies import (
    LoggedBodies,
    read_request_log,
    token_ids,
)
from ttftscope.doctor.prefix import PrefixDiff, pair_diffs
from ttftscope.doctor.serverfacts import GatewayFacts
from ttftscope.doctor.textspeed import slow_path_facts
from ttftscope.errors import TtftscopeError
from ttftscope.findings import Evidence, Finding
from ttftscope.tokenization.loader import Tokenizer

__all__ = ["TextEvidence", "text_findings"]

DEFAULT_BLOCK = 16  # vLLM's default block size, when the server did not say
# a divergence in the first this-many of a prompt's tokens is "early"
EARLY_SHARE = 0.9


@dataclass
class TextEvidence:
    """Request logs, the tokenizer to render and check them with, and the KV block size."""

    logs: Sequence[Path]
    tokenizer: Tokenizer | None = None
    block_size: int | None = None
    notes: list[str] = field(default_factory=list)

    def read(self) -> list[tuple[Path, LoggedBodies]]:
        """Each readable log; an unreadable one becomes a note."""
        out: list[tuple[Path, LoggedBodies]] = []
        for path in self.logs:
            try:
                log = read_request_log(path)
            except TtftscopeError as exc:
                self.notes.append(f"{path}: {exc.message}")
                continue
            if log.skipped:
                self.notes.append(f"{path.name}: skipped {log.skipped} line(s) with no body")
            out.append((path, log))
        return out


def _dynamic_title(d: PrefixDiff, kinds: str) -> str:
    lost = d.lost_tokens()
    if lost is None or d.shared_tokens is None:
        return f"the prompt changes early ({kinds}): the prefix cache cannot reuse it"
    return (
        f"the prompt changes at token {d.shared_tokens:,} ({kinds}): every request "
        f"recomputes {lost:,} tokens"
    )


def _dynamic_finding(
    path: Path, log: LoggedBodies, d: PrefixDiff, pair: tuple[int, int], bs: int, block_known: bool
) -> Finding:
    a, b = (log.lines[i] for i in pair)
    where = f"{path.name} lines {a} → {b}"
    kinds = ", ".join(sorted({v.kind for v in d.dynamic})) or "a changed value"
    facts = [f"prompts diverge at character {d.diverge_char:,} of {d.chars_a:,}"]
    if d.shared_tokens is not None and d.tokens_a is not None:
        facts[0] += f" (token {d.shared_tokens:,} of {d.tokens_a:,})"
    for v in d.dynamic[:3]:
        facts.append(f"{v.kind}: {v.before!r} → {v.after!r}")
    lost, blocks, cost = d.lost_tokens(), d.blocks_lost(bs), d.hit_rate_cost(bs)
    if lost is None:
        facts.append(f"{d.lost_chars():,} characters of the earlier prompt are not reused")
    else:
        size = f"block size {bs}" + ("" if block_known else " assumed (vLLM's default)")
        facts.append(f"{lost:,} tokens recomputed per request ({blocks} KV blocks, {size})")
    if cost is not None:
        facts.append(f"costs {cost:.0%} of the prefix-cache hit rate")
    return Finding(
        id="dynamic-prefix",
        severity="warning",
        title=_dynamic_title(d, kinds),
        evidence=[Evidence(fact=f, source=where) for f in facts],
        remedy=(
            "move timestamps, dates and ids out of the system prompt and tool definitions "
            "(put them in the latest user turn), keep tool JSON keys in a fixed order; "
            "`ttftscope prefix-diff` shows the exact spot"
        ),
    )


def _early(d: PrefixDiff) -> bool:
    if d.diverge_char is None:
        return False
    lost = d.lost_tokens()
    lost = d.lost_chars() if lost is None else lost
    return lost > 0 and d.diverge_char < EARLY_SHARE * d.chars_a


def _first_early(
    log: LoggedBodies, tok: Tokenizer | None
) -> tuple[PrefixDiff, tuple[int, int]] | None:
    """The first conversation pair whose prompts diverge early."""
    return next(((d, pair) for pair, d in pair_diffs(log.bodies, tok) if _early(d)), None)


def dynamic_findings(ev: TextEvidence, logs: Sequence[tuple[Path, LoggedBodies]]) -> list[Finding]:
    """The first early divergence of each log's conversations (one finding per log)."""
    bs = ev.block_size or DEFAULT_BLOCK
    out: list[Finding] = []
    for path, log in logs:
        found = _first_early(log, ev.tokenizer)
        if found is not None:
            d, pair = found
            out.append(_dynamic_finding(path, log, d, pair, bs, ev.block_size is not None))
    return out


def _inexact_in_log(path: Path, log: LoggedBodies, tok: Tokenizer, bs: int) -> list[Evidence]:
    bad = lost = 0
    out: list[Evidence] = []
    for body, line in zip(log.bodies, log.lines, strict=True):
        sent = token_ids(body)
        if sent is None:
            continue
        exact = tok.encode(tok.decode(sent))
        if exact == sent:
            continue
        bad += 1
        at = common_prefix(sent, exact)
        lost += len(sent) // bs - at // bs
        if bad == 1:
            fact = (
                f"ids differ from an exact encode of their own text at token {at:,} of "
                f"{len(sent):,} ({sent[at : at + 3]} sent, {exact[at : at + 3]} exact)"
            )
            out.append(Evidence(fact=fact, source=f"{path.name} line {line}"))
    if bad:
        fact = f"{bad} request(s) with inexact ids: {lost:,} KV blocks of reuse lost"
        out.append(Evidence(fact=fact + f" (block size {bs})", source=path.name))
    return out


def _gateway_evidence(gw: GatewayFacts) -> Evidence:
    return Evidence(
        fact=f"gateway: {gw.shadow_mismatches:.0f} of {gw.shadow_checks:.0f} shadow checks "
        f"and {gw.verify_mismatches:.0f} of {gw.verify_checks:.0f} upstream checks differed",
        source=gw.source,
    )


def inexact_findings(
    ev: TextEvidence, logs: Sequence[tuple[Path, LoggedBodies]], gw: GatewayFacts | None
) -> list[Finding]:
    """Client ids that differ from an exact encode of their own text; gateway mismatches."""
    tok = ev.tokenizer
    bs = ev.block_size or DEFAULT_BLOCK
    facts = [
        e for path, log in logs if tok is not None for e in _inexact_in_log(path, log, tok, bs)
    ]
    if gw is not None and gw.mismatches:
        facts.append(_gateway_evidence(gw))
    if not facts:
        return []
    return [
        Finding(
            id="inexact-token-ids",
            severity="warning",
            title="token ids that an exact tokenizer would not produce",
            evidence=facts,
            remedy=(
                "encode appends with an exact incremental encoder (ttftscope.IncrementalEncoder"
                " or the gateway), never by concatenating ids of separately encoded pieces"
            ),
        )
    ]


def _texts(body: Mapping[str, object]) -> list[str]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    out: list[str] = []
    messages = body.get("messages")
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [
                p["text"]
                for p in content
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
    return out


def non_ascii_findings(
    ev: TextEvidence, logs: Sequence[tuple[Path, LoggedBodies]]
) -> list[Finding]:
    """Non-NFC text, byte-fallback characters and a slow non-ASCII tokenization path."""
    facts: list[Evidence] = []
    non_nfc = 0
    first: tuple[str, int, int] | None = None
    texts: list[str] = []
    for path, log in logs:
        for body, line in zip(log.bodies, log.lines, strict=True):
            for text in _texts(body):
                texts.append(text)
                if not text.isascii() and not unicodedata.is_normalized("NFC", text):
                    non_nfc += 1
                    if first is None:
                        at = next(i for i, c in enumerate(text) if unicodedata.combining(c))
                        first = (path.name, line, at)
    if first is not None:
        facts.append(
            Evidence(
                fact=f"{non_nfc} text(s) not in NFC (first: a combining mark at character "
                f"{first[2]:,})",
                source=f"{first[0]} line {first[1]}",
            )
        )
    slow, safe = slow_path_facts(texts, ev.tokenizer) if texts else ([], None)
    facts += slow
    if not facts:
        return []
    return [
        Finding(
            id="non-ascii-slow-path",
            severity="warning" if first is not None or slow else "info",
            title=_non_ascii_title(non_nfc, slow),
            evidence=facts,
            remedy=_nfc_remedy(safe),
        )
    ]


def _non_ascii_title(non_nfc: int, slow: Sequence[Evidence]) -> str:
    said = [f"{non_nfc} text(s) not in NFC"] if non_nfc else []
    said += [
        "slower tokenization" if "µs per character" in e.fact else "byte fallback" for e in slow
    ]
    return "non-ASCII input: " + ", ".join(said or ["a slower path"])


def _nfc_remedy(safe: bool | None) -> str:
    base = "normalize text to NFC on the client (unicodedata.normalize('NFC', s))"
    if safe is True:
        return base + ": this tokenizer normalizes to NFC itself, so the ids do not change"
    if safe is False:
        return (
            base + " only if you want composed characters: this tokenizer does not "
            "normalize, so NFC changes the ids the model sees"
        )
    return base + "; check with a tokenizer (--tokenizer) whether that changes the ids"


def text_findings(ev: TextEvidence, gw: GatewayFacts | None) -> list[Finding]:
    """Every finding that reads request texts (and the gateway's exactness counters)."""
    logs = ev.read()
    return [
        *dynamic_findings(ev, logs),
        *inexact_findings(ev, logs, gw),
        *non_ascii_findings(ev, logs),
    ]
