"""The regex-family window encoder: HF's ids without HF's regex or pipeline.

:class:`IncrementalEncoder` re-encodes a window of about the appended text; this class does
that faster and returns exactly ``offsets.convert(full.encode(window))`` (ids and
``2*end+flag`` words), or None, and then the caller encodes the window with HF as before.
The caller's own check (the window must reproduce the cached tokens of the piece before the
cut) still runs.

FastWindow (``Plan.mode == "regex"``). Used only when the declared components are: model BPE
without dropout, continuing-subword prefix or end-of-word suffix; normalizer none, NFC or NFD;
pre-tokenizer ``[Split(regex, Isolated), ByteLevel(use_regex=False)]`` or
``ByteLevel(use_regex=True)``, without prefix space; and the regex translates
(:func:`~ttftscope.tokenization.regex_ascii.translate_ascii`).

* Added tokens. HF splits them out first. The window is searched for every added token's
  text (one trie regex), raw and, for non-ASCII windows, after the normalizer (NFC can make
  ASCII, e.g. U+037E -> ";"); any hit means None. Without one the window is one segment:
  normalize, split with the regex, map bytes, ``model.tokenize`` each piece independently.
* ASCII stretches. NFC/NFD leave ASCII text unchanged. The translated pattern matches what
  onig matches on ASCII input (argument in ``regex_ascii``); Split/Isolated pieces are the
  matches and the gaps between them, so a stretch is used only if the matches cover it with
  no empty match. Each piece's byte-mapped text goes to ``model.tokenize``, the call HF makes
  per piece (deterministic without dropout, so results are cached per piece); with
  ``ignore_merges`` a whole-piece vocabulary hit is looked up with ``model.token_to_id``,
  the same lookup HF's BPE makes first. ByteLevel maps one byte to one character and an
  ASCII character is one byte, so token ends are running sums of token lengths (the values
  must concatenate to the piece, else None); the first token of each piece is flagged, as
  HF's word index changes there.
* Other stretches are encoded by HF (``full``, no post-processor), from a proven boundary up
  to a point right before an ASCII character inside the next long ASCII run.
* Joins. A stretch O = w[p:e] is a prefix of the rest R = w[p:]. By the read-horizon argument
  of :mod:`ttftscope.tokenization.incremental`, O's pieces that start before the piece
  holding q-2 (q: start of O's last coarse-class run) are R's pieces and that piece's start is
  a piece boundary of R; by the restart lemma R is continued from there. p is a piece boundary
  of the window (its start or an earlier cut). Composing normalizers: an ASCII stretch that
  ends before a non-ASCII character drops its last character (a letter may compose with a
  following mark), an HF stretch ends before an ASCII character (ASCII never composes with
  what precedes it), and cuts in HF stretches go before ASCII characters, so normalizing the
  stretches apart equals normalizing the window.

The SentencePiece window encoder is :mod:`ttftscope.tokenization.spacewindow`.

>>> shared_ints(2)[:3]
[0, 1, 2]
"""

from __future__ import annotations

import operator
import re
import unicodedata
from array import array
from bisect import bisect_right
from itertools import accumulate, chain
from typing import Any, NamedTuple, cast

import tokenizers

from ttftscope.tokenization.regex_ascii import translate_ascii
from ttftscope.tokenization.textscan import READ_MARGIN, RUN_CAP, last_run_start

_GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_MIN_ASCII = 24  # shortest ASCII stretch worth leaving HF for
_CACHE_CAP = 1 << 16


class Piece(NamedTuple):
    """A cached pre-token's BPE: ids, 2 × each token's length, and the piece-start flags."""

    ids: tuple[int, ...]
    doubled_lengths: tuple[int, ...]
    starts: tuple[int, ...]


# Fields read through C-level getters: the join loop runs over every piece of a window.
_IDS, _LENGTHS, _STARTS = (operator.itemgetter(i) for i in range(3))


_INTS: list[int] = []


def shared_ints(upto: int) -> list[int]:
    """A process-wide table of int objects 0..upto, so cached ids cost a pointer each.

    >>> shared_ints(3)[3]
    3
    """
    if upto >= len(_INTS):
        _INTS.extend(range(len(_INTS), upto + 1))
    return _INTS


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> visible character map (the ByteLevel alphabet).

    >>> bytes_to_unicode()[32]
    'Ġ'
    """
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    return {b: chr(b if b in keep else next(extra)) for b in range(256)}


def _trie_regex(words: list[str]) -> str:
    """One alternation with shared prefixes factored out (``re`` has no Aho-Corasick)."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        # the end-of-word alternative last: at a start, the longest word wins (HF's rule)
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        alts += [""] * ("" in node)
        if len(alts) == 1:
            return alts[0]
        return "(?:" + "|".join(alts) + ")"

    return emit(trie)


def _added_words(doc: dict[str, Any]) -> list[str]:
    return [w for t in doc.get("added_tokens") or [] if (w := str(t.get("content", "")))]


def added_regex(doc: dict[str, Any]) -> re.Pattern[str] | None:
    """One regex that finds any added token's text (None without added tokens).

    >>> added_regex({"added_tokens": [{"content": "<s>"}]}).findall("a<s>b")
    ['<s>']
    """
    words = _added_words(doc)
    return re.compile(_trie_regex(words)) if words else None


def _pattern(doc: dict[str, Any]) -> str | None:
    """The one regex of a [Split, ByteLevel(no regex)] or ByteLevel(regex) pre-tokenizer."""
    pre = doc.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if not steps or any(s.get("add_prefix_space") for s in steps):
        return None
    if len(steps) == 1 and steps[0].get("type") == "ByteLevel" and steps[0].get("use_regex"):
        return _GPT2_REGEX
    split, *rest = steps
    if split.get("type") != "Split" or split.get("invert") or split.get("behavior") != "Isolated":
        return None
    if [(s.get("type"), s.get("use_regex", True)) for s in rest] != [("ByteLevel", False)]:
        return None
    regex = (split.get("pattern") or {}).get("Regex")
    return regex if isinstance(regex, str) else None


def _forms(norm: dict[str, Any] | None) -> list[str] | None:
    """Unicode forms the normalizer applies in order, or None if it does anything else."""
    if norm is None:
        return []
    if norm.get("type") == "Sequence":
        parts = [_forms(n) for n in norm.get("normalizers", [])]
        return None if None in parts else [f for p in parts if p for f in p]
    return [norm["type"]] if norm.get("type") in ("NFC", "NFD") else None


class FastWindow:
    """Encode a window like ``full.encode(window)`` (ids, ``2*end+flag`` words), or say None.

    >>> from ttftscope.tokenization.window_engines import engines_for
    >>> fw = engines_for(o200k_tok).fast  # FastWindow.build(doc, full, table), where it applies
    >>> ids, words = fw.encode("y; x = 1\\n", 3)  # the window starts at character 3
    >>> ids == o200k_tok.encode("x = 1\\n"), [w // 2 for w in words]
    (True, [4, 6, 7, 8, 9])
    """

    def __init__(
        self,
        full: tokenizers.Tokenizer,
        regex: re.Pattern[str],
        forms: list[str],
        added: re.Pattern[str] | None,
        table: list[int],
    ) -> None:
        self._full, self._rx, self._forms, self._added = full, regex, forms, added
        self._model = full.model
        self._ignore_merges = False
        self._added_ids: dict[str, int] | None = None
        self._table = table
        self._map = str.maketrans(bytes_to_unicode())
        self._cache: dict[str, Piece] = {}

    @classmethod
    def build(
        cls, doc: dict[str, Any], full: tokenizers.Tokenizer, table: list[int]
    ) -> FastWindow | None:
        """A fast window encoder when the declared components allow one (else None)."""
        model = doc.get("model") or {}
        if (
            model.get("type") != "BPE"
            or model.get("dropout")
            or model.get("continuing_subword_prefix")
            or model.get("end_of_word_suffix")
        ):
            return None
        regex, forms = _pattern(doc), _forms(doc.get("normalizer"))
        translated = translate_ascii(regex) if regex is not None else None
        if translated is None or forms is None:
            return None
        fast = cls(full, re.compile(translated), forms, added_regex(doc), table)
        fast._ignore_merges = model.get("ignore_merges") is True
        flags = ("normalized", "lstrip", "rstrip", "single_word")
        found = {w: full.token_to_id(w) for w in _added_words(doc)}
        plain = not any(t.get(f) for t in doc.get("added_tokens") or [] for f in flags)
        if plain and None not in found.values():
            fast._added_ids = {w: i for w, i in found.items() if i is not None}
        return fast

    def encode(self, text: str, a0: int) -> tuple[list[int], array[int]] | None:
        """Tokens of ``text[a0:]`` (ends offset by ``a0``), None when the fast path can't tell."""
        w = text[a0:]
        ids: list[int] = []
        ends: array[int] = array("I")
        pos, added_ids = 0, self._added_ids
        if self._added is not None and added_ids is None:
            if self._has_added(w):
                return None
        elif self._added is not None and added_ids is not None:
            # HF splits added tokens out first (leftmost-longest on the raw text: these are
            # neither normalized nor stripped); each gap is a segment of its own
            for hit in self._added.finditer(w):
                if not self._segment(w, pos, hit.start(), ids, ends, a0):
                    return None
                ids.append(self._table[added_ids[hit.group()]])
                ends.append(2 * (a0 + hit.end()) + 1)
                pos = hit.end()
        return (ids, ends) if self._segment(w, pos, len(w), ids, ends, a0) else None

    def _segment(self, w: str, pos: int, n: int, ids: list[int], ends: array[int], a0: int) -> bool:
        """Emit the tokens of the segment ``w[pos:n]``, stretch by stretch."""
        while pos < n:
            hit = _NON_ASCII.search(w, pos, n)
            x = hit.start() if hit else n
            step = None
            if x - pos >= _MIN_ASCII or x == n:
                step = self._ascii(w, pos, x - (x < n), x == n, ids, ends, a0)
            if step is None:
                step = self._hf(w, pos, x, n, ids, ends, a0)
            if step is None or step <= pos:  # no progress: let HF encode the window
                return False
            pos = step
        return True

    def _has_added(self, w: str) -> bool:
        """Added-token text in the window, raw or normalized (NFC can make ASCII)."""
        assert self._added is not None
        if self._added.search(w):
            return True
        if self._forms and not w.isascii():
            for form in self._forms:
                w = unicodedata.normalize(form, w)  # type: ignore[arg-type]
            return self._added.search(w) is not None
        return False

    def _ascii(
        self, w: str, pos: int, end: int, final: bool, ids: list[int], ends: array[int], a0: int
    ) -> int | None:
        """Split ``w[pos:end]`` (ASCII) in Python; emit the pieces proven to be ``w``'s."""
        seg = w[pos:end]
        pieces = self._rx.findall(seg)
        if "" in pieces or "".join(pieces) != seg:
            return None
        stop = end
        if not final:
            starts = list(accumulate(map(len, pieces), initial=pos))
            q = last_run_start(w, end, RUN_CAP)
            j = bisect_right(starts, q - READ_MARGIN) - 1 if q >= 0 else 0
            if j < 1:
                return None
            del pieces[j:]
            stop = starts[j]
        vals: list[Piece | None] = list(map(self._cache.get, pieces))
        if None in vals and not self._fill(pieces, vals):
            return None
        full = cast("list[Piece]", vals)  # _fill filled every miss
        ids.extend(chain.from_iterable(map(_IDS, full)))
        # 2*end+flag per token: running sum of 2*length, plus the piece-start flag
        doubled = accumulate(chain.from_iterable(map(_LENGTHS, full)), initial=2 * (a0 + pos))
        next(doubled)
        ends.extend(map(operator.add, doubled, chain.from_iterable(map(_STARTS, full))))
        return stop

    def _fill(self, pieces: list[str], vals: list[Piece | None]) -> bool:
        """Tokenize cache misses with the model (exactly HF's per-piece call)."""
        cache, table = self._cache, self._table
        if len(cache) > _CACHE_CAP:
            cache.clear()
        for i, p in enumerate(pieces):
            if vals[i] is None:
                mapped = p.translate(self._map)
                whole = self._model.token_to_id(mapped) if self._ignore_merges else None
                if whole is not None:  # HF BPE's own ignore_merges rule, without Token objects
                    cache[p] = vals[i] = Piece((table[whole],), (2 * len(p),), (1,))
                    continue
                toks = self._model.tokenize(mapped)
                values = [t.value for t in toks]
                if "".join(values) != mapped:
                    return False
                cache[p] = vals[i] = Piece(
                    tuple(table[t.id] for t in toks),
                    tuple(2 * len(v) for v in values),
                    (1,) + (0,) * (len(values) - 1),
                )
        return True

    def _hf(
        self, w: str, pos: int, x: int, n: int, ids: list[int], ends: array[int], a0: int
    ) -> int | None:
        """HF-encode from ``pos`` over the non-ASCII text at ``x``; emit its proven pieces.

        The stretch ends inside the next ASCII run of more than ``m`` characters, right before
        an ASCII character; ``m`` grows until the proven cut passes ``pos``.
        """
        m = _MIN_ASCII
        while True:
            hit = re.search(f"[\\x00-\\x7f]{{{m + 1}}}", w[x:n])
            z = x + hit.end() - 1 if hit else n
            enc = self._full.encode(w[pos:z], add_special_tokens=False)
            words: list[int | None] = enc.word_ids
            if None in words:  # an added token after all: let HF do the whole window
                return None
            flags = list(map(operator.ne, words, [-1, *words[:-1]]))
            offsets: list[tuple[int, int]] = enc.offsets
            k = len(words) if z == n else self._hf_cut(w, pos, z, flags, offsets)
            if k > 0 or z == n:
                base2 = 2 * (pos + a0)
                ids.extend(map(self._table.__getitem__, enc.ids[:k]))
                doubled = (2 * e + base2 for _, e in offsets[:k])
                ends.extend(map(operator.add, doubled, flags[:k]))
                return z if k == len(words) else pos + offsets[k][0]
            m *= 4

    def _hf_cut(
        self, w: str, pos: int, z: int, flags: list[bool], offsets: list[tuple[int, int]]
    ) -> int:
        """Index of the first token after the proven boundary in an HF stretch (0: none)."""
        q = last_run_start(w, z, RUN_CAP)
        if q < 0:
            return 0
        k = bisect_right(offsets, (q - READ_MARGIN - pos, 1 << 62)) - 1
        while k > 0 and not (flags[k] and (not self._forms or w[pos + offsets[k][0]].isascii())):
            k -= 1
        return max(k, 0)
