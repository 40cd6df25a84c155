"""Where an incremental encode may cut a cached encoding, and why the ids stay exact.

An :class:`~ttftscope.tokenization.incremental.IncrementalEncoder` holds a text, its ids and
per token ``2 * end_offset + piece_start_flag`` (a :class:`Cached`). Given a new text sharing
the first c characters with it, :func:`find_cut` returns a :class:`Splice`: how many cached
tokens to keep and the tokens of the rest, encoded from a window; or None, and the encoder
encodes the text whole. The functions here only read the state; the encoder applies the splice.

Why the cut is exact (regex pre-tokenizer families, ``Plan.mode == "regex"``)
------------------------------------------------------------------------------
HF ``encode`` does: (1) split out added tokens (leftmost-longest, on the raw text), (2) in
each remaining segment normalize, (3) pre-tokenize with one regex split, (4) run BPE on each
piece independently. Let O be the old text, T the new one, c their common prefix length.

* Restart lemma. A regex without look-behind, ``\\b``, ``^``, ``\\G`` (checked by
  :func:`~ttftscope.tokenization.boundary.regex_is_local`) decides the match at position s from
  ``text[s:]`` alone, and a scan started at a piece boundary b meets exactly the pieces the
  full scan finds after b. So the tokens of ``T[b:]`` equal T's tokens after b, if b is a
  piece boundary of T.
* Read horizon. Every alternative allowed reads at most one prefix character, one run of a
  single coarse class (letters+marks, numbers, white space, other), a short tail (contraction
  of <= 3 characters, or a newline/"/" run that belongs to the match), and one character of
  look-ahead or ``$``. Let q be the start of the last coarse-class run of ``O[:c]`` and ps
  the start of O's piece that holds character q-2. A match of O ending at e <= ps reads at most
  up to index max(e + 2, end of its own run) <= q <= c - 1 (its run cannot span q-1|q, whose
  classes differ; "ambiguous" characters never end a run, which only moves q left). So every
  piece of O before ps is found identically in T: ps is a piece boundary of T, the cached
  tokens before ps are T's, and by the restart lemma ``encode(T[ps:])`` gives the rest.
* Added tokens. A match of an added token starting at s reads ``T[s:s+L]``; all occurrences
  starting before c - L are therefore identical, so cutting before c - L - 1 (and before the
  trailing white-space run when a token strips white space) keeps every occurrence whole.
* Canonical normalizers (NFC/NFD) never change text across an ASCII character (ASCII is never
  the second of a composition pair and blocks mark reordering), and keep coarse classes. The
  argument is run on ``O[:c']`` with c' the last ASCII character before c, and cuts are moved
  to pieces that start with an ASCII character.
* Belt and braces: the window starts one piece earlier and must reproduce the cached tokens of
  that piece, with a piece boundary at the cut; otherwise the call falls back to a full encode.

SentencePiece BPE (``Plan.mode == "space"``: no pre-tokenizer, normalizer only prepends "▁"
and maps " " to "▁")
------------------------------------------------------------------------------------------
The model runs BPE over a whole segment, but when no vocabulary token holds "▁" right after a
character other than "▁" (checked on the vocabulary when the tokenizer is loaded), no merge can
ever join the two sides of a position j where the normalized text has "▁" at j and something
else at j-1. BPE applies merges by rank over adjacent pairs, so with no pair across j the two
sides evolve exactly as if encoded separately. Cut at the latest such j before c - L (added
tokens, as above); the window is encoded without the "▁" start marker (it is mid-segment), and
a segment that starts after an added token inside the window is re-encoded with the marker
(HF prepends it to every segment). The previous word is re-encoded too and must match.

Window encoders: regex windows are encoded by :mod:`ttftscope.tokenization.fastpath` and space
windows by :mod:`ttftscope.tokenization.spacewindow` when the declared components allow
(exactly the ids and offsets of an HF encode of the window; arguments there), else by HF.

Verified path (any other or unknown component)
----------------------------------------------
No proof, so the window must reproduce the cached tokens over an overlap ending before c, at a
character boundary (all byte-fallback tokens of one character stay together); the splice is
at the end of that overlap. No overlap: widen the window 4x, up to 3 times; then full encode.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ttftscope.tokenization.offsets import convert, occurrences, plain
from ttftscope.tokenization.textscan import (
    READ_MARGIN,
    RUN_CAP,
    agreement,
    last_ascii,
    last_run_start,
    piece_start,
    word_start,
)
from ttftscope.tokenization.window_engines import Engines

_PIECE_CAP = 512  # most tokens walked back to find a piece start


@dataclass
class Cached:
    """What an encoder holds during one call: its engines, the shared int table, the cached
    text, its ids and per token ``2 * end + piece_start_flag``; ``widenings`` counts the
    verified path's widened windows during the call."""

    eng: Engines
    table: Sequence[int]
    text: str
    ids: list[int]
    ends: array[int]
    widenings: int = 0


class Splice(NamedTuple):
    """Keep the first ``keep`` cached tokens, then ``ids`` and ``ends``; ``chars`` characters
    were re-encoded; ``verified`` when the cut was checked by overlap, not proven."""

    keep: int
    ids: Sequence[int]
    ends: array[int]
    chars: int
    verified: bool = False


def find_cut(cached: Cached, text: str, c: int) -> Splice | None:
    """Where ``text``, sharing its first ``c`` characters with ``cached.text``, may reuse the
    cached tokens, by the tokenizer's plan mode; None: encode ``text`` whole.

    >>> from ttftscope.tokenization.window_engines import engines_for
    >>> empty = Cached(engines_for(o200k_tok), [], "", [], array("I"))
    >>> find_cut(empty, "hello", 0) is None  # nothing cached, nothing to keep
    True
    """
    mode = cached.eng.plan.mode
    if mode == "regex":
        return _regex_cut(cached, text, c)
    if mode == "space":
        found = _space_cut(cached, text, c)
        if found is not None:
            return found
    return _verified_cut(cached, text, c)


def _space_cut(cached: Cached, text: str, c: int) -> Splice | None:
    """Cut at a proven SentencePiece word start; the previous word is re-checked."""
    old, ends = cached.text, cached.ends
    target = _target(cached, c, c, 1)
    a = word_start(old, target, RUN_CAP) if target > 0 else -1
    a0 = word_start(old, a - 1, RUN_CAP) if a > 1 else -1
    if a0 <= 0:
        return None
    k, k0 = bisect_right(ends, 2 * a + 1), bisect_right(ends, 2 * a0 + 1)
    if not 0 < k0 < k or ends[k - 1] >> 1 != a or ends[k0 - 1] >> 1 != a0:
        return None
    space = cached.eng.space
    found = space.encode(text, a0) if space is not None else None
    win_ids, win_ends = found if found is not None else _window(cached, text, a0)
    n = k - k0
    if (
        win_ids[:n] != cached.ids[k0:k]
        or len(win_ends) <= n
        or [e >> 1 for e in win_ends[:n]] != [e >> 1 for e in ends[k0:k]]
    ):
        return None
    return Splice(k, win_ids[n:], win_ends[n:], len(text) - a0)


def _target(cached: Cached, c: int, horizon: int, extra: int) -> int:
    """Latest character before which a cut keeps added tokens and run reads intact."""
    old, plan = cached.text, cached.eng.plan
    target = min(horizon, c - plan.added_margin) - extra
    if plan.strip_tokens and c > 0 and old[c - 1].isspace():
        ws = last_run_start(old, c, RUN_CAP)
        target = min(target, ws - plan.added_margin) if ws >= 0 else -1
    return target


def _regex_cut(cached: Cached, text: str, c: int) -> Splice | None:
    old, ends = cached.text, cached.ends
    composing = cached.eng.plan.composing
    c_eff = last_ascii(old, c, RUN_CAP) if composing else c
    q = last_run_start(old, c_eff, RUN_CAP) if c_eff > 0 else -1
    target = _target(cached, c, q - READ_MARGIN, 0) if q >= 0 else -1
    if target <= 0:
        return None
    k = bisect_right(ends, 2 * target + 1)
    if k >= len(ends):
        return None
    k = _ascii_piece_start(cached, piece_start(ends, k, _PIECE_CAP))
    k0 = _ascii_piece_start(cached, piece_start(ends, k - 1, _PIECE_CAP)) if k > 0 else -1
    if k0 < 0 or k < 1:
        return None
    a0 = ends[k0 - 1] >> 1 if k0 > 0 else 0
    win_ids, win_ends = _regex_window(cached, text, a0)
    n = k - k0
    if (
        win_ids[:n] != cached.ids[k0:k]
        or win_ends[:n] != ends[k0:k]
        or len(win_ends) <= n
        or not win_ends[n] & 1
    ):
        return None
    return Splice(k, win_ids[n:], win_ends[n:], len(text) - (ends[k - 1] >> 1))


def _ascii_piece_start(cached: Cached, k: int) -> int:
    """``k``, or under a composing normalizer the latest piece start at or before it whose
    piece starts with an ASCII character (or 0)."""
    if cached.eng.plan.composing:
        old, ends = cached.text, cached.ends
        while k > 0 and not (old[ends[k - 1] >> 1].isascii()):
            k = piece_start(ends, k - 1, _PIECE_CAP)
    return k


def _regex_window(cached: Cached, text: str, a0: int) -> tuple[list[int], array[int]]:
    eng = cached.eng
    fast = eng.fast.encode(text, a0) if eng.fast is not None else None
    if fast is not None:
        return fast
    return convert(eng, cached.table, plain(eng.full, text[a0:]), a0, text)


def _verified_cut(cached: Cached, text: str, c: int) -> Splice | None:
    width = 64
    for attempt in range(4):
        target = _target(cached, c, c, width)
        if target <= 0:
            return None
        k0 = bisect_right(cached.ends, 2 * target + 1)
        if k0 == 0:
            return None
        a0 = cached.ends[k0 - 1] >> 1
        win_ids, win_ends = _window(cached, text, a0)
        n = agreement(cached.ids, cached.ends, k0, win_ids, win_ends, 2 * c + 1)
        if n >= 2:
            cached.widenings += attempt
            return Splice(k0 + n, win_ids[n:], win_ends[n:], len(text) - a0, verified=True)
        width *= 4
    cached.widenings += 3
    return None


def _window(cached: Cached, text: str, a0: int) -> tuple[list[int], array[int]]:
    """Encode ``text[a0:]`` mid-segment; segments after an added token get their marker."""
    eng, table = cached.eng, cached.table
    enc = plain(eng.window, text[a0:])
    ids, ends = convert(eng, table, enc, a0, text)
    if eng.window is eng.full or eng.added_ids.isdisjoint(ids):
        return ids, ends
    marks = occurrences(eng, ids, enc.offsets, a0, text)
    if True in marks:
        i = marks.index(True)
        start = ends[i - 1] >> 1 if i > 0 else a0
        rest_ids, rest_ends = convert(eng, table, plain(eng.full, text[start:]), start, text)
        return ids[:i] + rest_ids, ends[:i] + rest_ends
    return ids, ends
