"""Sessions without client cooperation: find the encoder whose prompt shares the most.

Clients resend whole conversations and no session id. Each cached entry holds a rendered
prompt and the :class:`~ttftscope.tokenization.incremental.IncrementalEncoder` that encoded
it. A request takes the entry sharing the longest prefix with its own prompt:

- the entry's prompt is a prefix of the new one (the agent appended a turn) and nobody else
  uses it: encode in place, which re-encodes only the tail;
- otherwise (another conversation with the same system prompt, an edited history, a new
  session of an agent whose every session starts with the same system prompt and tools,
  under any session header or none): fork the entry sharing the most, so the other
  conversation keeps its state, and encode the fork;
- nothing idle shares a prefix: a fresh encoder, whose full encode runs on the gateway's
  :class:`~ttftscope.gateway.runtime.workpool.WorkPool` (threads, the GIL released while HF encodes)
  so it never stalls the event loop; a full pool refuses it (``Overloaded``: a 503). An entry
  whose long re-encode is running on a worker thread is neither used nor copied until it is
  done.

Prompts are kept as UTF-8 (the encoder's own copy): an agent prompt holding one emoji is
4 bytes a character as a Python string, ~1 as UTF-8. Each entry also keeps its ids
serialized (:class:`~ttftscope.gateway.transport.idsbody.IdsJson`), so a turn re-serializes only the
ids after the ones the encoder kept.

Every path gives the ids of a full encode (the encoder is exact); a cache miss costs time,
never a wrong id. The cache is bounded by bytes (least recently used entries go first) and
safe under concurrent requests: an entry is used by one request at a time.

>>> import asyncio
>>> cache = SessionCache(o200k_tok, max_bytes=64 << 20)  # a loaded tokenizer (load_tokenizer)
>>> system = "You are terse. " * 40
>>> first = asyncio.run(cache.encode(system + "Q: hi"))
>>> turn = asyncio.run(cache.encode(system + "Q: hi A: hello Q: and?"))
>>> first.path, turn.path, turn.ids == o200k_tok.encode(system + "Q: hi A: hello Q: and?")
('full', 'append', True)
"""

from __future__ import annotations

import logging
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ttftscope.gateway.runtime.coldpool import ColdPool, ColdPoolBroken, ColdResult
from ttftscope.gateway.runtime.workpool import WorkPool
from ttftscope.gateway.transport.idsbody import IdsJson
from ttftscope.tokenization.incremental import STEP_CHARS, EncodePath, IncrementalEncoder
from ttftscope.tokenization.textscan import common_prefix_len
from ttftscope.tokenization.window_engines import hf_of

log = logging.getLogger("ttftscope.gateway")

# Prompts whose first characters differ share nothing worth a comparison; bucketing by them
# keeps a lookup to the entries that can match. Chat templates start every prompt with the
# same few tokens, so the key reaches into the system prompt.
_KEY_CHARS = 256
# A re-encode of more UTF-8 bytes than this goes to a worker process when there is a
# :class:`~ttftscope.gateway.runtime.coldpool.ColdPool`: where the encoder steps through a long text
# (see :data:`~ttftscope.tokenization.incremental.STEP_CHARS`) and its Python holds the GIL
# long enough, in total, to be felt by the loop. Shorter ones cost less than moving the state.
COLD_BYTES = 2 * STEP_CHARS
# A re-encode of more UTF-8 bytes than this goes to a worker thread: HF encodes ~2 chars a
# microsecond, so inline encodes hold the event loop ~2 ms at most (a full 100K-token encode
# takes 0.3-0.8 s).
_INLINE_BYTES = 4096


@dataclass
class _Entry:
    prompt: bytes  # UTF-8 (lone surrogates kept), usually the encoder's own copy
    encoder: IncrementalEncoder
    key: str  # the pin and the prompt's start: where an append to it is looked for
    start: str  # the prompt's start alone: where any session may fork it from
    nbytes: int = 0
    busy: bool = False
    json: IdsJson = field(default_factory=IdsJson)  # the ids as sent: kept between turns


@dataclass(frozen=True)
class Encoded:
    """The ids of one prompt (also as the JSON array sent upstream) and what they cost.

    >>> Encoded([1, 2], b"[1,2]", reused_tokens=1, encoded_chars=3, path="append",
    ...         seconds=0.001).ids_json
    b'[1,2]'
    """

    ids: list[int]
    ids_json: bytes
    reused_tokens: int
    encoded_chars: int
    path: EncodePath
    seconds: float
    widenings: int = 0
    full_fallback: bool = False


@dataclass
class CacheStats:
    """Counters for ``/metrics``: what the cache holds and how it behaved."""

    entries: int = 0
    nbytes: int = 0
    evictions: int = 0
    forks: int = 0
    shadow_checks: int = 0
    shadow_mismatches: int = 0
    cold_failures: int = 0  # encode worker processes that died with a job


class SessionCache:
    """Incremental encoders of recent conversations, bounded by ``max_bytes``."""

    def __init__(
        self,
        tok: Any,
        *,
        max_bytes: int,
        shadow_every: int = 0,
        pool: WorkPool | None = None,
        cold: ColdPool | None = None,
    ) -> None:
        self.tok = tok
        self.pool = pool or WorkPool(workers=1, queue=16)
        self.cold = cold
        # long encodes go to worker processes when the encoder's state can move there
        portable = cold is not None and IncrementalEncoder(tok).portable
        self._cold_key = cold.register(hf_of(tok)) if cold is not None and portable else ""
        self.max_bytes = max_bytes
        self.shadow_every = shadow_every or None
        self.stats = CacheStats()
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        # entry ids by key and by start, least recently used first (dicts as ordered sets)
        self._buckets: dict[str, dict[int, None]] = {}
        self._starts: dict[str, dict[int, None]] = {}
        self._next = 0

    @property
    def entries(self) -> int:
        """How many sessions are cached."""
        return len(self._entries)

    async def encode(self, prompt: str, pin: str | None = None) -> Encoded:
        """Ids of ``prompt`` (equal to a full encode), reusing the best cached session.

        ``pin`` (a client's session header) keeps conversations apart that share a prefix.
        :class:`~ttftscope.gateway.runtime.workpool.Overloaded` when a long encode finds the pool
        full.
        """
        start = prompt[:_KEY_CHARS]
        data = prompt.encode("utf-8", "surrogatepass")
        entry_id, entry, shared, fresh = self._take((pin or "") + "\0" + start, start, data)
        inline = len(data) - shared <= _INLINE_BYTES
        if not inline:
            try:
                self.pool.admit()
            except BaseException:  # refused: leave the cache as it was
                if fresh:
                    self._drop(entry_id)
                entry.busy = False
                raise
        stats = entry.encoder.stats
        before = (
            stats.widenings,
            stats.full_fallbacks,
            stats.shadow_checks,
            stats.shadow_mismatches,
        )
        t0 = time.perf_counter()
        try:
            if inline:
                ids, ids_json = _encode(entry, prompt)
            elif self._cold_key and _worth_moving(len(data), shared):
                ids, ids_json = await self._elsewhere(entry, prompt)
            else:
                ids, ids_json = await self.pool.run_admitted(_encode, entry, prompt)
        except BaseException:
            self._drop(entry_id)
            raise
        stats = entry.encoder.stats
        # the encoder's copy of the prompt's bytes (b"" when it could cache nothing: then
        # no later prompt may count on sharing them)
        entry.prompt = entry.encoder.utf8
        entry.busy = False
        self._account(entry_id, entry)
        # shadow results arrive with the encoder's next call: count what this call harvested
        self.stats.shadow_checks += stats.shadow_checks - before[2]
        self.stats.shadow_mismatches += stats.shadow_mismatches - before[3]
        return Encoded(
            ids,
            ids_json,
            reused_tokens=stats.last_reused_tokens,
            encoded_chars=stats.last_reencoded_chars,
            path=stats.path,
            seconds=time.perf_counter() - t0,
            widenings=stats.widenings - before[0],
            full_fallback=stats.full_fallbacks > before[1],
        )

    async def _elsewhere(self, entry: _Entry, prompt: str) -> tuple[list[int], bytes]:
        """Encode in a worker process, then adopt the state it reached on a worker thread
        (turning 100K uint32 ids into the shared ints took ~25 ms of GIL on a busy machine),
        one place in the pool held for both; if no worker could do it, the same place
        encodes it on a thread."""
        cold, key, enc = self.cold, self._cold_key, entry.encoder
        assert cold is not None
        enc.collect()  # a difference found by now drops the state: it is never sent as a base
        base = enc.snapshot() if enc.utf8 else None
        adopt = partial(_adopt, entry, prompt, base is not None)
        recover = partial(self._recover, entry, prompt)
        return await self.pool.await_admitted(
            lambda: self.pool.then(cold.submit(key, base, prompt), adopt, recover)
        )

    def _recover(self, entry: _Entry, prompt: str, exc: BaseException) -> tuple[list[int], bytes]:
        """On a worker thread: a job no worker process could do is encoded here."""
        if not isinstance(exc, ColdPoolBroken):
            raise exc
        self.stats.cold_failures += 1
        log.warning("%s; this prompt is encoded on a thread", exc)
        return _encode(entry, prompt)

    def _take(self, key: str, start: str, prompt: bytes) -> tuple[int, _Entry, int, bool]:
        """The entry to encode with (an idle extendable one of this session, a fork of the
        entry of any session sharing the most, or new), how many leading bytes of ``prompt``
        its state already covers, and whether it is new.

        A new session (another pin, or none) starts from what any session cached: agents
        send the same system prompt and tools first in every session. It always forks, so
        the other session's state is never changed under it."""
        best_id, best, shared = _best(self._entries, self._buckets.get(key, {}), prompt, 0)
        if best is not None and best_id is not None and shared == len(best.prompt):
            self._touch(best_id, best)
            best.busy = True
            return best_id, best, shared, False
        other_id, other, more = _best(self._entries, self._starts.get(start, {}), prompt, shared)
        if other is not None and other_id is not None:
            best_id, best, shared = other_id, other, more
        if best is not None and best_id is not None:
            self._touch(best_id, best)
            self.stats.forks += 1
            fork = _Entry(best.prompt, best.encoder.fork(), key, start, busy=True)
            fork.json = best.json.fork()
            return *self._add(fork), shared, True
        encoder = IncrementalEncoder(
            self.tok, shadow_every=self.shadow_every, shadow_runner=self.pool.background
        )
        return *self._add(_Entry(b"", encoder, key, start, busy=True)), 0, True

    def _touch(self, entry_id: int, entry: _Entry) -> None:
        """Mark ``entry`` most recently used (for eviction and for the next lookups)."""
        self._entries.move_to_end(entry_id)
        for index, name in ((self._buckets, entry.key), (self._starts, entry.start)):
            bucket = index[name]
            del bucket[entry_id]
            bucket[entry_id] = None

    def _add(self, entry: _Entry) -> tuple[int, _Entry]:
        entry_id, self._next = self._next, self._next + 1
        self._entries[entry_id] = entry
        self._buckets.setdefault(entry.key, {})[entry_id] = None
        self._starts.setdefault(entry.start, {})[entry_id] = None
        return entry_id, entry

    def _account(self, entry_id: int, entry: _Entry) -> None:
        kept = entry.encoder.utf8
        prompt = 0 if entry.prompt is kept else sys.getsizeof(entry.prompt)  # counted once
        entry.nbytes = entry.encoder.cached_bytes + prompt + entry.json.nbytes
        self.stats.nbytes = sum(e.nbytes for e in self._entries.values())
        while self.stats.nbytes > self.max_bytes and len(self._entries) > 1:
            # least recently used first; entries in use stay (their request is running)
            victim = next((i for i, e in self._entries.items() if not e.busy), None)
            if victim is None:
                break
            self._evict(victim)
        self.stats.entries = len(self._entries)

    def _evict(self, entry_id: int) -> None:
        self.stats.nbytes -= self._drop(entry_id)
        self.stats.evictions += 1

    def _drop(self, entry_id: int) -> int:
        """Forget one entry; its bytes."""
        entry = self._entries.pop(entry_id, None)
        if entry is None:
            return 0
        for index, name in ((self._buckets, entry.key), (self._starts, entry.start)):
            bucket = index.get(name)
            if bucket is not None:
                bucket.pop(entry_id, None)
                if not bucket:
                    del index[name]
        self.stats.entries = len(self._entries)
        return entry.nbytes


def _best(
    entries: dict[int, _Entry], bucket: dict[int, None], prompt: bytes, shared: int
) -> tuple[int | None, _Entry | None, int]:
    """The idle entry of ``bucket`` sharing more than ``shared`` leading bytes with
    ``prompt`` and the most of them (None if none does), and how many it shares."""
    best_id, best = None, None
    # most recent first, so the likely best comes early and the rest are ruled out cheaply
    for entry_id in reversed(bucket):
        if shared == len(prompt):
            break  # nothing can share more
        entry = entries[entry_id]
        # a busy entry is mid-encode on a worker thread (inline encodes never yield):
        # its state is changing, so it can be neither taken nor copied
        if entry.busy or not _may_share_more(entry.prompt, prompt, shared):
            continue
        n = common_prefix_len(entry.prompt, prompt)
        if n > shared:
            best_id, best, shared = entry_id, entry, n
    return best_id, best, shared


def _encode(entry: _Entry, prompt: str) -> tuple[list[int], bytes]:
    """The ids of ``prompt`` and their JSON, from ``entry`` (busy: only this call uses it).

    Runs on a worker thread for long encodes: the JSON of 100K fresh ids takes ~2 ms too.
    """
    ids = entry.encoder.encode(prompt)
    kept = min(entry.encoder.stats.last_reused_tokens, len(ids))
    return ids, entry.json.update(ids, kept)


def _adopt(entry: _Entry, prompt: str, based: bool, done: ColdResult) -> tuple[list[int], bytes]:
    """The ids a worker process sent and their JSON, its state taken by ``entry``'s encoder
    (busy: only this call uses it). If a shadow check of the state sent as its base found a
    difference meanwhile, the worker started from wrong ids: ``prompt`` is encoded here in
    full instead, as :meth:`~IncrementalEncoder.encode` would have after that check."""
    enc = entry.encoder
    enc.collect()
    if based and not enc.utf8:  # dropped by a mismatch
        return _encode(entry, prompt)
    ids = enc.adopt(done.state, done.stats)
    entry.json = IdsJson(done.blocks)
    return ids, entry.json.json()


def _worth_moving(size: int, shared: int) -> bool:
    """Whether a prompt of ``size`` bytes, ``shared`` of them cached, goes to a worker
    process: over :data:`COLD_BYTES` to encode, and more new than cached (a state moves both
    ways whole, while a thread splices only the new part).

    >>> _worth_moving(400_000, 0), _worth_moving(400_000, 50_000), _worth_moving(440_000, 400_000)
    (True, True, False)
    """
    return size - shared > COLD_BYTES and shared * 2 < size


def _may_share_more(old: bytes, new: bytes, shared: int) -> bool:
    """Whether ``old`` can share more than ``shared`` leading characters with ``new``.

    A full comparison costs a pass over both prompts (~0.3 ms at 100K tokens); with many
    entries sharing a system prompt (agents, retries) it would run for each. This O(1) test
    rules most of them out: sharing more needs ``old`` to be longer and to agree with
    ``new`` at the first character the best entry so far does not share.

    >>> _may_share_more(b"abcX", b"abcY", 0), _may_share_more(b"abxY", b"abcY", 3)
    (True, True)
    >>> _may_share_more(b"abcX", b"abcY", 3), _may_share_more(b"ab", b"abcY", 3)
    (False, False)
    """
    return len(old) > shared and (shared == 0 or old[shared] == new[shared])
