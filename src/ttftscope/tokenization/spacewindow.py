"""SentencePiece-BPE windows (``Plan.mode == "space"``) encoded from cached chunks.

The window is mid-segment (no "▁" prepended) and its normalized text is the raw text with " "
mapped to "▁". The encoder splits it into chunks, takes each chunk's tokens from a cache, and
gives the chunks it has not seen to the BPE model (``model.tokenize``, the call HF makes on a
normalized segment when there is no pre-tokenizer).

Why chunks may be encoded apart
-------------------------------
HF's BPE (no dropout, no ``ignore_merges``) maps each character to its vocabulary symbol, or
to byte tokens (``byte_fallback``), or to the unknown token, then repeatedly applies the
lowest-ranked merge among adjacent symbol pairs. Every symbol it ever creates is a merge
result, so a merge across position j of a text makes a symbol holding the pair
``(t[j-1], t[j])`` of adjacent characters. Let P be every adjacent character pair inside the
merge results (``left + right``). When ``(t[j-1], t[j])`` is not in P, no merge ever joins the
two sides of j; each side then sees exactly its own merges, in the same rank order, as if the
other were not there: BPE of the text is BPE of ``t[:j]`` followed by BPE of ``t[j:]``.
Unknown characters are the exception: HF holds an unknown character's ``<unk>`` back until a
vocabulary character or another unknown one comes (fusing them with ``fuse_unk``), so byte
tokens of a later character can come out before it. So either no character can be unknown
(``byte_fallback`` with all 256 byte tokens) or no byte fallback can overtake it and none
fuse (``byte_fallback`` and ``fuse_unk`` off); otherwise chunks are split only at "▁" (a
vocabulary symbol, which flushes a held ``<unk>`` in the whole text as at a chunk's end).

Characters fall into a few classes (:data:`_CLASSES` and "other"); a pair of classes is
*joinable* when P has a pair of characters of those classes. The chunk regex ends a chunk
wherever the next character's class is not joinable with the current one, so each cut is a
position proven safe above. Words are looked up first and only unseen words are split
further; words are split before every "▁" that follows another character (the plan proved no
vocabulary token holds such a "▁") and around each ASCII character no merge result holds
(digits and line feed, in Llama 2 and Mistral). A window holding any added token's text (raw or
normalized) is left to HF (None), as HF splits those out before the model runs.

>>> from ttftscope.tokenization.window_engines import engines_for
>>> window = engines_for(llama2_tok).space  # SpaceWindow.build(doc, window, table)
>>> window.encode("a x = 1", 1)[0] == llama2_tok.encode("x = 1")
True
"""

from __future__ import annotations

import operator
import re
from array import array
from bisect import bisect_left
from itertools import accumulate, chain, compress, pairwise
from typing import Any, NamedTuple, cast

import tokenizers

from ttftscope.tokenization.boundary import SPACE_MARK
from ttftscope.tokenization.fastpath import added_regex

_CACHE_CAP = 1 << 16
_KEY_CAP = 64  # longest word or chunk kept in the cache


class Chunk(NamedTuple):
    """A cached word's or chunk's BPE: ids, and 2 × each token's length in characters."""

    ids: tuple[int, ...]
    doubled_lengths: tuple[int, ...]


# Fields read through C-level getters: the join loop runs over every word of a window.
_IDS, _LENGTHS = operator.itemgetter(0), operator.itemgetter(1)
# Character classes as bracket contents; anything else is "other". "▁" first (own class).
_CLASSES = (SPACE_MARK, "A-Za-z", r"\d", r"!-/:-@\[-`{-~", r"\t\n\x0b\x0c\r")
_OTHER = len(_CLASSES)
_MEMBER = [re.compile(f"[{c}]") for c in _CLASSES]
_BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")


def _class_of(ch: str) -> int:
    return next((i for i, rx in enumerate(_MEMBER) if rx.match(ch)), _OTHER)


def _merge_strings(model: dict[str, Any]) -> list[str] | None:
    """``left + right`` of every merge; None when a merge's form is unknown or it joins a
    byte-fallback or unknown token (their text is not the text they stand for)."""
    out = []
    unk = model.get("unk_token")
    for merge in model.get("merges") or []:
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or "" in parts:
            return None
        if any(_BYTE_TOKEN.fullmatch(p) or p == unk for p in parts):
            return None
        out.append(parts[0] + parts[1])
    return out


def has_every_byte_token(vocab: dict[str, int]) -> bool:
    """All 256 ``<0xNN>`` tokens, so byte fallback can spell any character.

    >>> has_every_byte_token({})
    False
    """
    return all(f"<0x{b:02X}>" in vocab for b in range(256))


def merge_pairs(model: dict[str, Any]) -> set[tuple[str, str]] | None:
    """Adjacent characters inside merge results (``left + right``): the pairs P of the module
    docstring. None when chunks must stay whole words (an unread merge form, or an ``<unk>``
    HF may hold back).

    >>> sorted(merge_pairs({"merges": ["a (", "( b"], "vocab": {}}))
    [('(', 'b'), ('a', '(')]
    """
    merged = _merge_strings(model)
    every_byte = has_every_byte_token(model.get("vocab") or {})
    if (
        merged is None
        or (model.get("byte_fallback") and not every_byte)
        or (model.get("fuse_unk") and not model.get("byte_fallback"))
    ):
        return None
    return {pair for s in merged for pair in pairwise(s)}  # a few thousand, from 32K merges


def joinable_classes(pairs: set[tuple[str, str]]) -> set[tuple[int, int]]:
    """Class pairs that some merge joins.

    >>> sorted(joinable_classes({("a", "("), ("(", "b")}))
    [(1, 3), (3, 1)]
    """
    return {(_class_of(a), _class_of(b)) for a, b in pairs}


def _union(classes: set[int]) -> str:
    """A regex character set for the union of some classes."""
    if _OTHER in classes:
        return "[^" + "".join(c for i, c in enumerate(_CLASSES) if i not in classes) + "]"
    return "[" + "".join(_CLASSES[i] for i in sorted(classes)) + "]"


def chunk_regex(joinable: set[tuple[int, int]]) -> re.Pattern[str]:
    """Chunks: runs of characters whose neighbouring classes are all joinable.

    The regex matches whole runs of one class (a class joinable with itself; else a single
    character) and continues past a run only when the next character's class is joinable.
    Runs are possessive, so a chunk never ends inside a run.

    >>> chunk_regex({(0, 1), (1, 1)}).findall("\u2581ab(c12")
    ['\u2581ab', '(', 'c', '1', '2']
    """
    every = set(range(_OTHER + 1))
    runs, branches = [], []
    for left in sorted(every):
        run = _union({left}) + ("++" if (left, left) in joinable else "")
        runs.append(run)
        follow = {b for a, b in joinable if a == left}
        if follow:
            branches.append(f"{run}(?={_union(follow) if follow != every else '.'})")
    loop = f"(?:{'|'.join(branches)})*+" if branches else ""
    return re.compile(f"{loop}(?:{'|'.join(runs)})", re.DOTALL)


def lone_characters(pairs: set[tuple[str, str]]) -> str:
    """ASCII characters in no merge result (digits and line feed, in Llama 2): no merge joins
    them to anything, so both sides of each are safe cuts. Every merge result has two or more
    characters, so its characters are exactly those of its pairs.

    >>> "a" in lone_characters({("a", "b")}), "7" in lone_characters(set())
    (False, True)
    """
    held = {ch for pair in pairs for ch in pair}
    return "".join(chr(c) for c in range(128) if chr(c) not in held)


def word_regex(lone: str) -> re.Pattern[str]:
    """Words: split before each "▁" that follows another character (the plan's proof) and
    around each ``lone`` character (see :func:`lone_characters`).

    Coarser than chunks, so a window is fewer, mostly cached, pieces.

    >>> word_regex("123;").findall("\u2581ab12\u2581\u25813;")
    ['\u2581ab', '1', '2', '\u2581\u2581', '3', ';']
    """
    if not lone:
        return re.compile("\u2581*[^\u2581]+|\u2581+")
    inner = "".join(f"\\x{ord(c):02x}" for c in lone)
    return re.compile(f"\u2581*[^\u2581{inner}]+|\u2581+|[{inner}]")


class SpaceWindow:
    """Encode a mid-segment SentencePiece window like the window tokenizer, from cached chunks.

    >>> from ttftscope.tokenization.window_engines import engines_for
    >>> ids, words = engines_for(llama2_tok).space.encode("\\u2581x = 1", 0)
    >>> ids == llama2_tok.encode("x = 1"), [w // 2 for w in words]
    (True, [2, 4, 5, 6])
    """

    def __init__(
        self,
        window: tokenizers.Tokenizer,
        added: re.Pattern[str] | None,
        words: re.Pattern[str],
        chunks: re.Pattern[str] | None,
        table: list[int],
    ) -> None:
        self._model, self._added, self._table = window.model, added, table
        self._words, self._chunks = words.findall, chunks.findall if chunks else None
        self._cache: dict[str, Chunk] = {}  # words and chunks: the BPE of each alone

    @classmethod
    def build(
        cls, doc: dict[str, Any], window: tokenizers.Tokenizer, table: list[int]
    ) -> SpaceWindow:
        """The chunk-wise encoder of a tokenizer whose plan is "space" (the caller checks);
        ``window`` is the tokenizer without its start-of-input marker."""
        pairs = merge_pairs(doc.get("model") or {})
        if pairs is None:
            return cls(window, added_regex(doc), word_regex(""), None, table)
        chunks = chunk_regex(joinable_classes(pairs))
        return cls(window, added_regex(doc), word_regex(lone_characters(pairs)), chunks, table)

    def encode(self, text: str, a0: int) -> tuple[list[int], array[int]] | None:
        """Tokens of ``text[a0:]`` as a mid-segment window, or None (added-token text)."""
        norm = text[a0:].replace(" ", SPACE_MARK)
        added = self._added
        if added is not None and (added.search(text, a0) or added.search(norm)):
            return None
        words = self._words(norm)
        vals: list[Chunk | None] = list(map(self._cache.get, words))
        if None in vals and not self._fill(words, vals):
            return None
        full = cast("list[Chunk]", vals)  # _fill filled every miss
        ids = list(chain.from_iterable(map(_IDS, full)))
        doubled = accumulate(chain.from_iterable(map(_LENGTHS, full)), initial=2 * a0)
        next(doubled)
        return ids, array("I", doubled)

    def _fill(self, words: list[str], vals: list[Chunk | None]) -> bool:
        """Values of unseen words, from their chunks; unseen chunks go to the BPE model.

        Words and chunks longer than ``_KEY_CAP`` are encoded but not kept (a huge run would
        otherwise pin its text in the cache).
        """
        cache = self._cache
        if len(cache) > _CACHE_CAP:
            cache.clear()
        fresh: dict[str, Chunk] = {}
        for word in set(compress(words, map(operator.not_, vals))):
            parts = self._chunks(word) if self._chunks is not None else [word]
            pieces = []
            for part in parts:
                found = cache.get(part) or fresh.get(part) or self._tokenize(part)
                if found is None:
                    return False
                fresh[part] = found
                pieces.append(found)
            fresh[word] = (
                pieces[0]
                if len(pieces) == 1
                else Chunk(
                    tuple(chain.from_iterable(map(_IDS, pieces))),
                    tuple(chain.from_iterable(map(_LENGTHS, pieces))),
                )
            )
        vals[:] = map(fresh.get, words, vals)  # a miss's new value, else the cached one
        cache.update((k, v) for k, v in fresh.items() if len(k) <= _KEY_CAP)
        return True

    def _tokenize(self, chunk: str) -> Chunk | None:
        """The model's BPE of one chunk (HF's own per-segment call), ends as character offsets.

        Model offsets count UTF-8 bytes; HF reports the character holding a token's last
        byte, so all byte-fallback tokens of one character end where that character ends.
        """
        toks = self._model.tokenize(chunk)
        byte_ends = [t.offsets[1] for t in toks]
        if chunk.isascii():
            char_ends = byte_ends
        else:
            widths = list(accumulate(len(ch.encode()) for ch in chunk))
            char_ends = [bisect_left(widths, e) + 1 for e in byte_ends]
        if not char_ends or char_ends[-1] != len(chunk):
            return None
        steps = map(operator.sub, char_ends, [0, *char_ends[:-1]])
        return Chunk(tuple(self._table[t.id] for t in toks), tuple(map((2).__mul__, steps)))
