"""How a tokenizer treats the user's non-ASCII text: time per character, byte fallback, NFC.

Timing compares the user's own non-ASCII texts with the same texts made ASCII (every
non-ASCII character replaced by a letter), so length and structure match and only the
characters differ; the better of three runs each, side by side.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Sequence

from ttftscope.findings import Evidence
from ttftscope.tokenization.loader import Tokenizer

__all__ = ["nfc_keeps_ids", "slow_path_facts"]

SLOW_RATIO = 2.0
_CAP = 200_000  # characters timed at most
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def _best(fn: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _asciified(text: str) -> str:
    return "".join(c if c.isascii() else "a" for c in text)


def nfc_keeps_ids(texts: Sequence[str], tok: Tokenizer) -> bool | None:
    """Whether NFC-normalizing the non-NFC texts leaves their ids unchanged (None: none).

    >>> nfc_keeps_ids(["already NFC"], tok=None) is None  # type: ignore[arg-type]
    True
    """
    odd = [t for t in texts if not unicodedata.is_normalized("NFC", t)]
    if not odd:
        return None
    return all(tok.encode(t) == tok.encode(unicodedata.normalize("NFC", t)) for t in odd)


def _byte_fallback(text: str, tok: Tokenizer) -> int:
    ids = tok.encode(text)
    return sum(1 for i in ids if _BYTE_TOKEN.fullmatch(tok.hf.id_to_token(i) or ""))


def slow_path_facts(
    texts: Sequence[str], tok: Tokenizer | None
) -> tuple[list[Evidence], bool | None]:
    """Evidence of a slow non-ASCII path and of byte fallback; whether NFC keeps the ids.

    >>> slow_path_facts(["only ascii"], None)
    ([], None)
    """
    if tok is None:
        return [], None
    wide = "".join(t for t in texts if not t.isascii())[:_CAP]
    if not wide:
        return [], None
    facts: list[Evidence] = []
    plain = _asciified(wide)
    t_wide, t_plain = _best(lambda: tok.encode(wide)), _best(lambda: tok.encode(plain))
    ratio = t_wide / t_plain if t_plain > 0 else 0.0
    share = sum(1 for c in wide if not c.isascii()) / len(wide)
    source = f"tokenizer {tok.name}, {len(wide):,} characters of the logged texts"
    if ratio >= SLOW_RATIO:
        facts.append(
            Evidence(
                fact=f"tokenizing texts with non-ASCII ({share:.0%} of their characters) takes "
                f"{t_wide / len(wide) * 1e6:.2f} µs per character, {ratio:.1f}× the same texts "
                f"in ASCII ({t_plain / len(plain) * 1e6:.2f} µs)",
                source=source,
            )
        )
    fallback = _byte_fallback(wide, tok)
    if fallback:
        facts.append(
            Evidence(
                fact=f"{fallback:,} tokens are byte-fallback pieces (<0x..>): characters the "
                "vocabulary lacks cost one token per UTF-8 byte",
                source=source,
            )
        )
    return facts, nfc_keeps_ids(texts, tok)
