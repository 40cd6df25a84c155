"""An incremental encoder's state as bytes: what a worker process sends back.

:meth:`~ttftscope.tokenization.incremental.IncrementalEncoder.snapshot` gives it,
:meth:`~ttftscope.tokenization.incremental.IncrementalEncoder.adopt` takes it (here or in
another process, with the same tokenizer).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from ttftscope.tokenization.offsets import BLOCK


@dataclass(frozen=True)
class EncoderState:
    """An encoder's state as bytes another process can send: the text (UTF-8), the ids and
    the ``2*end+flag`` words (uint32 each); ``ends`` None: ``ids`` only, nothing to cache
    (the text was served by a plain full encode).

    >>> from ttftscope import IncrementalEncoder
    >>> enc = IncrementalEncoder(o200k_tok)
    >>> _ = enc.encode("hello world"); enc.snapshot().text
    b'hello world'
    """

    text: bytes
    ids: bytes
    ends: bytes | None


def shared_ids(table: list[int], raw: bytes) -> list[int]:
    """uint32 ids as a list of ``table``'s int objects (one per id, shared by every cached
    list), a block at a time: a C-level map of 100K ids holds the GIL ~25 ms on a busy
    machine, a block of :data:`~ttftscope.tokenization.offsets.BLOCK` a fraction of that.

    >>> shared_ids(list(range(10)), array("I", [3, 7]).tobytes())
    [3, 7]
    """
    words = array("I")
    words.frombytes(raw)
    out: list[int] = []
    for a in range(0, len(words), BLOCK):
        out += map(table.__getitem__, words[a : a + BLOCK])
    return out
