"""From an HF encoding to the encoder's state: shared-int ids and ``2*end+flag`` words."""

from __future__ import annotations

import operator
from array import array
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import tokenizers

from ttftscope.tokenization.window_engines import Engines


class Unsure(Exception):
    """Internal: the fast path cannot tell; the caller falls back to a full encode."""


def plain(tk: tokenizers.Tokenizer, text: str) -> Any:
    """Encode without special-token insertion (the window and full encodes are bare)."""
    return tk.encode(text, add_special_tokens=False)


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
