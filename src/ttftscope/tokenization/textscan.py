"""Scans of the text and of the cached token ends that the incremental encoder cuts by.

Each scan is bounded (a ``cap`` of characters or tokens), so a call never reads the whole
context; the cut rules they serve are argued in :mod:`ttftscope.tokenization.incremental`.

>>> common_prefix_len("abc", "abd")
2
"""

from __future__ import annotations

import unicodedata
from array import array
from typing import AnyStr

from ttftscope.tokenization.boundary import SPACE_MARK

RUN_CAP = 4096  # longest trailing same-class run searched before giving up (full encode)
# The read horizon's margin: a proven cut keeps only the pieces before the one holding
# character ``q - READ_MARGIN`` (``q``: where the text's last coarse-class run starts), since
# a regex match may read past its own end (o200k's contractions: " abc" + "'s"). The cut
# (``cuts``) and the fast window's joins (``fastpath``) both stop there;
# tests/tokenization/test_read_horizon.py pins each.
READ_MARGIN = 2

# --- character classes -----------------------------------------------------------------------
# Coarse classes of the read-horizon argument: letters+marks, numbers, white space, other.
# Characters whose class may differ between Python and the regex engine (C0 separators, NEL,
# zero-width and format characters, code points unassigned in Python's Unicode version) are
# "ambiguous": they never end a run, which can only move a cut earlier, never later.
_AMBIGUOUS = frozenset("\x1c\x1d\x1e\x1f\x85\xa0\u180e\u200b\u200c\u200d\u2060\ufeff\u2028\u2029")


def char_class(ch: str) -> str:
    """Coarse class of one character: "L" (letters, marks), "N", "S" (white space), "O", "?".

    >>> [char_class(c) for c in "a1 .\\u0301\\x1c"]
    ['L', 'N', 'S', 'O', 'L', '?']
    """
    if ch in _AMBIGUOUS:
        return "?"
    if ch.isspace():
        return "S"
    cat = unicodedata.category(ch)
    if cat == "Cn":  # unassigned here, maybe assigned in the regex engine's Unicode version
        return "?"
    if cat[0] in "LM":
        return "L"
    if cat[0] == "N":
        return "N"
    return "O"


def last_run_start(text: str, end: int, cap: int) -> int:
    """Start of the last run of one coarse class in ``text[:end]``, or -1 past ``cap`` chars.

    >>> last_run_start("ab  12", 6, 100)
    4
    """
    if end <= 0:
        return 0
    i = end - 1
    cls = char_class(text[i])
    stop = max(0, end - cap)
    while i > 0:
        prev = char_class(text[i - 1])
        if prev != cls and prev != "?" and cls != "?":
            return i
        if cls == "?":
            cls = prev
        i -= 1
        if i < stop:
            return -1
    return 0


def common_prefix_len(old: AnyStr, new: AnyStr) -> int:
    """Length of the longest common prefix, by C-speed chunk comparisons (no per-char loop).

    >>> common_prefix_len("hello world", "hello there"), common_prefix_len(b"ab", b"ac")
    (6, 1)
    """
    if new.startswith(old):
        return len(old)
    lo, hi = 0, min(len(old), len(new))
    while hi - lo > 32:
        mid = (lo + hi) // 2
        if old.startswith(new[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    while lo < hi and old[lo] == new[lo]:
        lo += 1
    return lo


def word_start(text: str, end: int, cap: int) -> int:
    """Largest j <= end with text[j] a space or "▁" and text[j-1] neither (-1 if none near).

    >>> word_start("ab  cd ef", 5, 100)
    2
    """
    # bounded: an unbounded rfind of a "▁" that raw text never holds scans the whole context
    lo = max(0, end - cap)
    j = max(text.rfind(" ", lo, end + 1), text.rfind(SPACE_MARK, lo, end + 1))
    stop = max(0, j - cap)
    while j > stop and text[j - 1] in (" ", SPACE_MARK):
        j -= 1
    return j if j > stop else -1


def piece_start(ends: array[int], k: int, cap: int) -> int:
    """Index of the token that starts the piece holding token ``k`` (-1 past ``cap`` tokens).

    ``ends`` holds ``2 * end_offset + piece_start_flag`` per token.

    >>> piece_start(array("I", [3, 5, 6, 9]), 2, 10)
    1
    """
    stop = max(0, k - cap)
    while k > stop and not ends[k] & 1:
        k -= 1
    return k if ends[k] & 1 else -1


def last_ascii(text: str, c: int, cap: int) -> int:
    """Index of the last ASCII character before ``c`` (a cut there is normalization-stable).

    >>> last_ascii("abé", 3, 10)
    1
    """
    for i in range(c - 1, max(-1, c - 1 - cap), -1):
        if text[i].isascii():
            return i
    return 0


def agreement(
    ids: list[int],
    ends: array[int],
    k0: int,
    win_ids: list[int],
    win_ends: array[int],
    limit: int,
) -> int:
    """Tokens from ``k0`` on that the window reproduces, ending at a character boundary < limit.

    >>> agreement([1, 2, 3], array("I", [2, 4, 6]), 0, [1, 2, 9], array("I", [2, 4, 8]), 99)
    2
    """
    best = 0
    n = min(len(ids) - k0, len(win_ids) - 1)
    for i in range(n):
        e = ends[k0 + i]
        if ids[k0 + i] != win_ids[i] or (e >> 1) != (win_ends[i] >> 1) or e > limit:
            break
        nxt = ends[k0 + i + 1] >> 1 if k0 + i + 1 < len(ends) else None
        if (win_ends[i + 1] >> 1) > (e >> 1) and (nxt is None or nxt > (e >> 1)):
            best = i + 1
    return best
