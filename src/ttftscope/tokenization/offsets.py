"""From an HF encoding to the encoder's state: shared-int ids and ``2*end+flag`` words.

Long texts are encoded with ``encode_batch([text])``: HF's ``encode`` holds the GIL for the
whole call (a 100K-token prompt: 0.3-0.8 s during which no other Python thread, the event
loop included, runs), ``encode_batch`` releases it and gives the same encoding. Short
windows keep ``encode`` (``encode_batch`` costs ~30% more there). Reading the encoding's
lists still holds the GIL (``offsets`` of 100K tokens: 20-60 ms); reading them in slices
(``truncate`` + ``overflowing``) was measured to hold it longer in total, ~50 ms more.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import tokenizers

from ttftscope.tokenization.window_engines import Engines

# texts this long are encoded with the GIL released (``encode`` holds it ~1 ms per 500 chars)
BATCH_CHARS = 4096


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
    token occurrence (word indices may restart after one). C-level maps where possible.
    """
    ids: list[int] = enc.ids
    if not ids:
        return [], array("I")
    offsets: list[tuple[int, int]] = enc.offsets
    shifted = map(
        operator.lshift,
        map(operator.add, map(operator.itemgetter(1), offsets), repeat(base)),
        repeat(1),
    )
    if eng.plan.mode != "regex":  # piece flags are only read by the regex cut
        return list(map(table.__getitem__, ids)), array("I", shifted)
    words: list[int | None] = enc.word_ids
    flags = list(map(operator.ne, words, [-1, *words[:-1]]))
    if not eng.added_ids.isdisjoint(ids):
        marks = occurrences(eng, ids, offsets, base, text)
        flags = list(map(operator.or_, flags, marks))
        flags[1:] = map(operator.or_, flags[1:], marks[:-1])
    ends = array("I", map(operator.add, shifted, flags))
    return list(map(table.__getitem__, ids)), ends


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
