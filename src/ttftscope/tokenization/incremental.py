"""Exact incremental encoding: re-encode only what changed, with the ids a full encode gives.

State after each call: the text as UTF-8 bytes (a str holding one emoji takes 4 bytes per
character; agent prompts hold a few, and UTF-8 decodes at ~3 GB/s), the ids, and per token
``2 * end_offset + piece_start_flag`` in an ``array('I')``. Ids live in a list whose int objects
come from one process-wide table, so the per-token cost is 8 + 4 bytes plus the text.

Where a changed text may reuse the cached tokens, and the proofs that the ids stay exact,
are in :mod:`ttftscope.tokenization.cuts`; this module keeps the state, applies the splices
and encodes what has no cut (a first or unrelated text).

Cold texts: a text longer than ``2 * STEP_CHARS`` is encoded as appends of ``STEP_CHARS``
characters from an empty state, through the same proven cuts (regex and space modes), so HF
never builds a long prompt's whole offsets list while holding the GIL; on the qwen2 and llama2
fixtures a 175K-token text also took ~4x less time this way (the window engines' piece cache).

>>> enc = IncrementalEncoder(o200k_tok)  # a loaded tokenizer (load_tokenizer)
>>> enc.encode("hello") == enc.encode("hello") == o200k_tok.encode("hello")
True
"""

from __future__ import annotations

import sys
import time
from array import array
from dataclasses import dataclass
from typing import Literal

import tokenizers

from ttftscope.tokenization.cuts import Cached, Splice, find_cut
from ttftscope.tokenization.encoder_state import EncoderState, shared_ids
from ttftscope.tokenization.fastpath import shared_ints
from ttftscope.tokenization.offsets import Unsure, convert, encode_ids, plain
from ttftscope.tokenization.shadow import Runner, ShadowChecks
from ttftscope.tokenization.textscan import common_prefix_len
from ttftscope.tokenization.window_engines import Engines, HasHF, engines_for

# A cold text longer than twice this is encoded in appends of this many characters
# (:meth:`IncrementalEncoder._stepped`): ~4K tokens, whose offsets HF builds in ~1-3 ms.
STEP_CHARS = 16_384
# plan modes whose cuts are proven (the verified mode's widening windows cost more)
_PROVEN = ("regex", "space")
# How the last call was served ("" before the first): nothing changed, a proven cut after an
# append or an edit, a cut verified by overlap, or a full encode.
EncodePath = Literal["", "same", "append", "edit", "append-verified", "edit-verified", "full"]
Change = Literal["append", "edit"]
_VERIFIED: dict[Change, EncodePath] = {"append": "append-verified", "edit": "edit-verified"}


@dataclass
class EncoderStats:
    """Counters of an :class:`IncrementalEncoder`; ``path`` and ``last_*`` describe the last call.

    >>> EncoderStats().calls
    0
    """

    calls: int = 0
    reused_tokens: int = 0
    reencoded_chars: int = 0
    widenings: int = 0
    full_fallbacks: int = 0
    shadow_checks: int = 0
    shadow_mismatches: int = 0
    shadow_skipped: int = 0  # the runner was busy
    last_cost_ms: float = 0.0
    last_reused_tokens: int = 0
    last_reencoded_chars: int = 0
    path: EncodePath = ""


class IncrementalEncoder:
    """Encode successive texts, reusing the tokens of the longest common prefix.

    ``encode(text)`` always equals ``tok.encode(text, add_special_tokens=...)``.
    ``shadow_every=N`` re-checks every Nth call against a full encode on a background
    thread (or on ``shadow_runner``, see :mod:`~ttftscope.tokenization.shadow`), off the
    caller's latency path. Results are collected on the caller's thread at the
    next call (or :meth:`flush`): checks and mismatches are counted in ``stats`` and a mismatch
    drops the cache, so the next call is a full encode. One encoder holds one conversation's
    state and is not thread-safe; use one per session. A tokenizer reconfigured while in use
    (tokens added, truncation, normalizer, pre-tokenizer, model type, size or flags) is noticed
    at the next call; adding a text the vocabulary already has, changing an added token's
    flags, or swapping in a model of the same type, size and flags, only by encoders created
    afterwards (reading those costs ~0.2 ms per call, or a model's whole vocabulary).

    >>> from ttftscope import IncrementalEncoder
    >>> tok = o200k_tok  # load_tokenizer(<o200k's tokenizer.json, its folder or .tiktoken file>)
    >>> enc = IncrementalEncoder(tok)
    >>> code = "def f(x):\\n    return x + 1\\n\\n" * 40
    >>> len(enc.encode(code)), enc.stats.path
    (440, 'full')
    >>> enc.encode(code + "print(f(2))\\n") == tok.encode(code + "print(f(2))\\n")
    True
    >>> enc.stats.path, enc.stats.last_reused_tokens
    ('append', 433)
    """

    def __init__(
        self,
        tok: HasHF | tokenizers.Tokenizer,
        add_special_tokens: bool = False,
        shadow_every: int | None = None,
        shadow_runner: Runner | None = None,
    ) -> None:
        self._eng: Engines = engines_for(tok)
        self._table = shared_ints(self._eng.max_id)
        self.add_special_tokens = add_special_tokens
        self.shadow_every = shadow_every
        self.stats = EncoderStats()
        self._text: str | None = None  # the cached text, decoded for the call under way
        self._utf8: bytes | None = None  # the cached text between calls
        self._ids: list[int] = []
        self._ends: array[int] = array("I")
        self._shadow = ShadowChecks(shadow_runner)

    def reset(self) -> None:
        """Forget the cached text; the next call is a full encode.

        >>> enc = IncrementalEncoder(o200k_tok)
        >>> code = "def f(x):\\n    return x + 1\\n\\n" * 40
        >>> _ = enc.encode(code); enc.reset()
        >>> _ = enc.encode(code + "f(2)\\n"); enc.stats.path  # 'append' without the reset
        'full'
        """
        self._text = None
        self._utf8 = None
        self._ids = []
        self._ends = array("I")

    @property
    def cached_bytes(self) -> int:
        """Bytes held in the ids list, the offsets array and the text (ints are shared).

        >>> enc = IncrementalEncoder(o200k_tok)
        >>> empty = enc.cached_bytes
        >>> _ = enc.encode("hello world " * 100); enc.cached_bytes > empty
        True
        """
        ends = self._ends.buffer_info()[1] * self._ends.itemsize
        return sys.getsizeof(self._ids) + ends + sys.getsizeof(self.utf8)

    @property
    def utf8(self) -> bytes:
        """The text the cached state describes, UTF-8 encoded (lone surrogates kept), or
        ``b""`` when nothing is cached.

        >>> enc = IncrementalEncoder(o200k_tok)
        >>> enc.utf8, enc.encode("hello world") == o200k_tok.encode("hello world"), enc.utf8
        (b'', True, b'hello world')
        """
        return self._utf8 or b""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, equal to a full encode with the same settings.

        >>> IncrementalEncoder(o200k_tok).encode("hello world")
        [24912, 2375]
        """
        t0 = time.perf_counter()
        self._harvest(wait=False)
        if not self._eng.current():  # the tokenizer was reconfigured since: start over
            self._eng = engines_for(self._eng.main)
            self._table = shared_ints(self._eng.max_id)
            self.reset()
        self.stats.calls += 1
        self._text = None if self._utf8 is None else self._utf8.decode("utf-8", "surrogatepass")
        try:
            return self._encode(text, t0)
        finally:
            self._text = None  # only the bytes stay between calls

    def _encode(self, text: str, t0: float) -> list[int]:
        eng = self._eng
        if not (eng.plain_ok and (eng.specials_ok or not self.add_special_tokens)):
            out = encode_ids(eng.main, text, special=self.add_special_tokens)
            self._finish("full", t0)
            return out
        path: EncodePath | None = None
        if self._text is not None and isinstance(text, str) and text:
            try:
                path = self._update(text)
            except Exception:  # the full encode below raises the caller-facing error
                path = None
            self.stats.full_fallbacks += path is None
        if path is None:
            try:
                path = self._full(text)
            except Unsure:  # the cache cannot describe this text: serve a plain full encode
                self.reset()
                out = encode_ids(eng.main, text, special=self.add_special_tokens)
                self._finish("full", t0)
                return out
        return self._deliver(text, path, t0)

    def _deliver(self, text: str, path: EncodePath, t0: float) -> list[int]:
        """Keep ``text`` as the cached state's text and hand out its ids (a copy)."""
        eng = self._eng
        self._utf8 = text.encode("utf-8", "surrogatepass")
        if self.add_special_tokens:
            out = [*eng.prefix]
            out += self._ids
            out += eng.suffix
        else:
            out = self._ids.copy()
        self._finish(path, t0)
        if self.shadow_every and self.stats.calls % self.shadow_every == 0:
            main, special = self._eng.main, self.add_special_tokens
            started = self._shadow.submit(
                lambda: encode_ids(main, text, special=special), list(out)
            )
            self.stats.shadow_skipped += not started
        return out

    @property
    def portable(self) -> bool:
        """Whether this encoder keeps a state that :meth:`snapshot` and :meth:`adopt` can move
        between processes (a tokenizer whose plain encode it may cache at all).

        >>> IncrementalEncoder(o200k_tok).portable
        True
        """
        eng = self._eng
        return eng.plain_ok and (eng.specials_ok or not self.add_special_tokens)

    def snapshot(self) -> EncoderState:
        """The cached state as bytes (:meth:`adopt` takes it, here or in another process).

        >>> enc = IncrementalEncoder(o200k_tok)
        >>> _ = enc.encode("hello world")
        >>> other = IncrementalEncoder(o200k_tok)
        >>> other.adopt(enc.snapshot()), other.utf8
        ([24912, 2375], b'hello world')
        """
        return EncoderState(self.utf8, array("I", self._ids).tobytes(), self._ends.tobytes())

    def adopt(self, snap: EncoderState, took: EncoderStats | None = None) -> list[int]:
        """Take the state another encoder of the same tokenizer reached (a worker process
        that encoded a long text: ids a full encode gives, so they need no check here) and
        return its ids, as :meth:`encode` of that text would; ``took`` is that call's stats.

        >>> long = "def f(x):\\n    return x + 1\\n\\n" * 40
        >>> worker = IncrementalEncoder(o200k_tok)
        >>> ids = worker.encode(long)
        >>> here = IncrementalEncoder(o200k_tok)
        >>> here.adopt(worker.snapshot(), worker.stats) == ids, here.stats.path
        (True, 'full')
        >>> _ = here.encode(long + "f(2)\\n"); here.stats.path
        'append'
        """
        t0 = time.perf_counter()
        self._harvest(wait=False)
        st = self.stats
        st.calls += 1
        if took is not None:
            st.reused_tokens += took.last_reused_tokens
            st.reencoded_chars += took.last_reencoded_chars
            st.widenings += took.widenings
            st.full_fallbacks += took.full_fallbacks
            st.last_reused_tokens = took.last_reused_tokens
            st.last_reencoded_chars = took.last_reencoded_chars
        path: EncodePath = "full" if took is None or not took.path else took.path
        if snap.ends is not None and len(snap.ends) != len(snap.ids):
            raise ValueError("an encoder state whose ids and offsets differ in length")
        ids = shared_ids(self._table, snap.ids)
        if snap.ends is None:  # served whole, nothing cached (as :meth:`encode` does then)
            self.reset()
            self._finish("full", t0)
            return ids
        self._ids, self._ends = ids, array("I")
        self._ends.frombytes(snap.ends)
        return self._deliver(snap.text.decode("utf-8", "surrogatepass"), path, t0)

    def fork(self) -> IncrementalEncoder:
        """A new encoder starting from this one's state (another conversation sharing a prefix).

        The two evolve independently; copying the state costs about a list copy of the ids.

        >>> enc = IncrementalEncoder(o200k_tok)
        >>> shared = "def f(x):\\n    return x + 1\\n\\n" * 40
        >>> _ = enc.encode(shared)
        >>> other = enc.fork()
        >>> other.encode(shared + "# end\\n") == o200k_tok.encode(shared + "# end\\n")
        True
        >>> other.stats.last_reused_tokens, enc.stats.calls
        (433, 1)
        """
        self._harvest(wait=False)
        other = IncrementalEncoder.__new__(IncrementalEncoder)
        other.__dict__.update(self.__dict__)
        other.stats = EncoderStats()
        other._ids = self._ids.copy()
        other._ends = array("I", self._ends)
        other._shadow = ShadowChecks(self._shadow.runner)
        return other

    def collect(self) -> None:
        """Account for the shadow checks that have finished, without waiting; one that found
        a difference drops the cache (as at the start of every :meth:`encode`).

        >>> enc = IncrementalEncoder(o200k_tok, shadow_every=1)
        >>> _ = enc.encode("a"); enc.collect(); enc.stats.shadow_mismatches
        0
        """
        self._harvest(wait=False)

    def flush(self) -> None:
        """Wait for pending shadow checks and account for them (tests, shutdown).

        >>> enc = IncrementalEncoder(o200k_tok, shadow_every=1)
        >>> _ = enc.encode("a"); _ = enc.encode("ab"); enc.flush()
        >>> enc.stats.shadow_checks, enc.stats.shadow_mismatches
        (2, 0)
        """
        self._harvest(wait=True)

    def _finish(self, path: EncodePath, t0: float) -> None:
        if path == "full":  # also the plain encodes that bypass the cache: nothing was kept
            self.stats.last_reused_tokens = 0
        self.stats.path = path
        self.stats.last_cost_ms = (time.perf_counter() - t0) * 1e3

    # --- full and shadow ---------------------------------------------------------------------
    def _full(self, text: str) -> EncodePath:
        self.reset()
        stepped = len(text) > 2 * STEP_CHARS and self._eng.plan.mode in _PROVEN
        if not (stepped and self._stepped(text)):
            self.reset()
            enc = plain(self._eng.full, text)
            self._ids, self._ends = convert(self._eng, self._table, enc, 0, text)
        self.stats.reencoded_chars += len(text)
        self.stats.last_reused_tokens, self.stats.last_reencoded_chars = 0, len(text)
        return "full"

    def _stepped(self, text: str) -> bool:
        """Encode a long ``text`` as successive appends of :data:`STEP_CHARS` characters
        (proven cuts, the same path as a conversation's turns): HF hands back each window's
        offsets as one list built while holding the GIL (100K tokens: 20-130 ms during which
        no other thread, the event loop included, runs); a window's list is short. Whether
        it got there (else the caller encodes ``text`` whole)."""
        st = self.stats
        kept = st.reused_tokens, st.reencoded_chars, st.widenings
        try:
            end = STEP_CHARS
            self._text = text[:end]
            enc = plain(self._eng.full, self._text)
            self._ids, self._ends = convert(self._eng, self._table, enc, 0, self._text)
            while end < len(text):
                end = len(text) if len(text) - end < 2 * STEP_CHARS else end + STEP_CHARS
                part = text[:end]
                if self._update(part) is None:
                    return False
                self._text = part
        except Exception:  # e.g. Unsure: the whole text decides
            return False
        finally:
            st.reused_tokens, st.reencoded_chars, st.widenings = kept
        return True

    def _harvest(self, *, wait: bool) -> None:
        """Count finished shadow checks on the caller's thread; a mismatch drops the cache."""
        checks, mismatches = self._shadow.collect(wait=wait)
        self.stats.shadow_checks += checks
        self.stats.shadow_mismatches += mismatches
        if mismatches:
            self.reset()

    # --- incremental ---------------------------------------------------------------------
    def _update(self, text: str) -> EncodePath | None:
        old = self._text
        assert old is not None
        c = common_prefix_len(old, text)
        if c == len(old) == len(text):
            self.stats.last_reused_tokens, self.stats.last_reencoded_chars = len(self._ids), 0
            return "same"
        kind: Change = "append" if c == len(old) else "edit"
        cached = Cached(self._eng, self._table, old, self._ids, self._ends)
        try:
            cut = find_cut(cached, text, c)
        finally:
            self.stats.widenings += cached.widenings
        if cut is None:
            return None
        self._splice(cut)
        return _VERIFIED[kind] if cut.verified else kind

    def _splice(self, cut: Splice) -> None:
        del self._ids[cut.keep :]
        self._ids.extend(cut.ids)
        del self._ends[cut.keep :]
        self._ends.extend(cut.ends)
        self.stats.reused_tokens += cut.keep
        self.stats.reencoded_chars += cut.chars
        self.stats.last_reused_tokens, self.stats.last_reencoded_chars = cut.keep, cut.chars
