"""From an HF encoding to the encoder's state: shared-int ids and ``2*end+flag`` words.

Long texts are encoded with ``encode_batch([text])``: HF's ``encode`` holds the GIL for the
whole call (a 100K-token prompt: 0.3-0.8 s during which no other Python thread, the event
loop included, runs), ``encode_batch`` releases it and gives the same encoding. Short
windows keep ``encode`` (``encode_batch`` costs ~30% more there). Reading the encoding's
lists holds the GIL for the whole list (``offsets`` of 100K tokens: 20-130 ms on a loaded
2-core machine, in one call no other thread can interrupt); reading them in slices
(``truncate`` + ``overflowing``) was measured to hold it longer in total, ~50 ms more. So
long cold texts are never encoded whole: the incremental encoder encodes them as appends
of ``STEP_CHARS`` (:meth:`~ttftscope.tokenization.incremental.IncrementalEncoder._full`),
and :func:`convert` maps an encoding in blocks of :data:`BLOCK` tokens.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any

import tokenizers

from ttftscope.tokenization.window_engines import Engines

# texts this long are encoded with the GIL released (``encode`` holds it ~1 ms per 500 chars)
BATCH_CHARS = 4096
# tokens converted per C-level pass: ~2 ms holding the GIL on a loaded 2-core machine
BLOCK = 4096


class Unsure(Exception):
    """Internal: the fast path cannot tell; the caller falls back to a full encode."""


def plain(tk: tokenizers.Tokenizer, text: str) -> Any:
    """Encode without special-token insertion (the window and full encodes are bare); long
    texts with the GIL released (same ids, offsets and words as ``encode``)."""
    if len(text) >= BATCH_CHARS:
        return tk.encode_batch([text], add_special_tokens=False)[0]
    return tk.encode(text, add_special_tokens=False)


def encode_ids(tk: tokenizers.Tokenizer, text: str, *, special: bool) -> list[int]:
    """``tk.encode(text, add_special_tokens=special).ids``, long texts with the GIL released."""
    if not isinstance(text, str) or len(text) < BATCH_CHARS:
        out: list[int] = tk.encode(text, add_special_tokens=special).ids
        return out
    ids: list[int] = tk.encode_batch([text], add_special_tokens=special)[0].ids
    return ids


def convert(
    eng: Engines, table: Sequence[int], enc: Any, base: int, text: str
) -> tuple[list[int], array[int]]:
    """Ids (shared ints) and ``2*end+flag`` words of an encoding of ``text[base:]``.

    A token starts a piece when its word index changes or it is, or follows, an added
    token occurrence (word indices may restart after one). C-level maps, one block of
    :data:`BLOCK` tokens at a time (a whole 100K-token encoding in one map keeps the GIL,
    and the event loop out, for 50-100 ms).

    >>> from ttftscope.tokenization.window_engines import engines_for
    >>> enc = o200k_tok.hf.encode("hello world", add_special_tokens=False)
    >>> ids, ends = convert(engines_for(o200k_tok), range(300_000), enc, 0, "hello world")
    >>> ids, [e >> 1 for e in ends]
    ([24912, 2375], [5, 11])
    """
    ids: list[int] = enc.ids
    if not ids:
        return [], array("I")
    offsets: list[tuple[int, int]] = enc.offsets
    words: list[int | None] | None = None
    marks: list[bool] | None = None
    if eng.plan.mode == "regex":  # piece flags are only read by the regex cut
        words = enc.word_ids
        if not eng.added_ids.isdisjoint(ids):
            marks = occurrences(eng, ids, offsets, base, text)
    out: list[int] = []
    ends = array("I")
    for a in range(0, len(ids), BLOCK):  # between blocks, waiting threads take the GIL
        b = a + BLOCK
        out += map(table.__getitem__, ids[a:b])
        shifted = map(
            operator.lshift,
            map(operator.add, map(operator.itemgetter(1), offsets[a:b]), repeat(base)),
            repeat(1),
        )
        if words is not None:
            shifted = map(operator.add, shifted, _flags(words, marks, a, b))
        ends.extend(array("I", shifted))
    return out, ends


def _flags(words: list[int | None], marks: list[bool] | None, a: int, b: int) -> Iterator[bool]:
    """Piece-start flags of tokens ``a:b``: a new word index, or an added token occurrence
    or the token right after one."""
    before = words[a - 1 : b - 1] if a else [-1, *words[: b - 1]]
    flags: Iterator[bool] = map(operator.ne, words[a:b], before)
    if marks is None:
        return flags
    marked = marks[a - 1 : b - 1] if a else [False, *marks[: b - 1]]
    return map(operator.or_, flags, map(operator.or_, marks[a:b], marked))


def occurrences(
    eng: Engines, ids: list[int], offsets: list[tuple[int, int]], base: int, text: str
) -> list[bool]:
    """Which tokens are added tokens found in the text (not a model's unknown token)."""
    added, unk = eng.added, eng.unk_id
    marks = [False] * len(ids)
    for i in [i for i, tid in enumerate(ids) if tid in added]:
        content = added[ids[i]]
        s, e = offsets[i]
        marks[i] = content in text[base + s : base + e]
        if not marks[i] and ids[i] != unk:
            raise Unsure(f"added token {content!r} matched on normalized text")
    return marks
