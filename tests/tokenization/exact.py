"""Exactness checks that also hold the encoder to the path it must take.

Equal ids alone cannot fail when the incremental path breaks: the encoder falls back to a full
encode on any error in its update, and a full encode is always right. So each step also checks
the path, from the two texts alone (never from the encoder's own analysis): the same text is
"same"; with at least :data:`REUSE_MIN` characters in common, an append or an edit is served by a
cut of that kind, with no full fallback. Below that margin a full encode is allowed (no cut can
sit before an edit at the very start; the widest margin the fixture families need is ~50).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import tokenizers

from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer

REUSE_MIN = 256  # characters in common from which a cut must be found
# "proven": the regex/SentencePiece cut; "verified": the overlap check of unknown components;
# "either": proven or verified (configurations where the proven cut may decline, e.g. added
# tokens that strip white space)
Cut = Literal["proven", "verified", "either"]


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b`` (a plain loop: independent of the encoder)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def expected_paths(old: str | None, new: str, cut: Cut = "proven") -> set[str] | None:
    """Paths allowed from ``old`` to ``new``; None when a full encode is allowed too."""
    if old is None:
        return {"full"}
    if old == new:
        return {"same"}
    if common_prefix(old, new) < REUSE_MIN:
        return None
    kind = "append" if new.startswith(old) else "edit"
    return {
        "proven": {kind},
        "verified": {f"{kind}-verified"},
        "either": {kind, f"{kind}-verified"},
    }[cut]


@dataclass
class Exact:
    """Feeds texts to one encoder; each must give a full encode's ids by the path it must take."""

    enc: IncrementalEncoder
    tok: Tokenizer | tokenizers.Tokenizer
    cut: Cut = "proven"
    add_special_tokens: bool = False
    last: str | None = None  # the previous text; None: the encoder holds no state
    paths: list[str] = field(default_factory=list)
    free: bool = False  # the next step may take any path (set by :meth:`allow_fallback`)

    def allow_fallback(self) -> None:
        """Let the next step fall back to a full encode (a documented limit, not a bug)."""
        self.free = True

    def __call__(self, text: str) -> list[int]:
        fallbacks = self.enc.stats.full_fallbacks
        got = self.enc.encode(text)
        path = self.enc.stats.path
        where = (path, repr(text[-80:]))
        assert got == self.full(text), where
        allowed = None if self.free else expected_paths(self.last, text, self.cut)
        self.free = False
        if allowed is not None:
            assert path in allowed, (f"path {path!r}, expected one of {sorted(allowed)}", *where)
            assert self.enc.stats.full_fallbacks == fallbacks, ("full fallback", *where)
        self.last = text
        self.paths.append(path)
        return got

    def full(self, text: str) -> list[int]:
        """The reference: a full encode by the tokenizer itself."""
        if isinstance(self.tok, tokenizers.Tokenizer):
            return list(self.tok.encode(text, add_special_tokens=self.add_special_tokens).ids)
        return self.tok.encode(text, add_special_tokens=self.add_special_tokens)
