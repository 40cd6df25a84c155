"""Long re-encodes in worker processes: the gateway's event loop never shares a GIL with them.

A cold 100K-token prompt is 0.3-0.8 s of encoding. On a worker thread HF's part releases the
GIL, but the encoder's own steps between (cuts, offsets, window encodes: Python and C-level
maps) take it for up to a few ms at a time, and a worker preempted while holding it makes
the loop wait for a thread that runs below its priority. Here such an encode runs in another
process, with its own GIL, scheduled only when nothing else wants the CPU: the gateway sends
the text (and the state it starts from, if any) and adopts the state that comes back on a
worker thread (:meth:`~ttftscope.tokenization.incremental.IncrementalEncoder.adopt`: 100K
uint32 ids made into the shared int objects, ~25 ms of C-level maps on a busy machine).

Measured (``benchmarks/gateway_soak.py``, 2 cores shared with other work, 6 cold 100K-token
prompts in flight, what the gateway adds to the p99 of small chats against the same chats
sent straight to the upstream at the same instant): 2 processes 1.6-14 ms (median 6 over 12
runs), threads only 11-55 ms (median 15 over 7, more in 6 of the 7 runs paired with
processes), for ~105 MB of RSS per process, so a gateway on 2 cores or more runs 2 by
default (``encode_processes = "auto"``). At nice +10 instead of ``SCHED_IDLE`` they added
13-19 ms: the loop, the clients and the upstream waited for the kernel to preempt a busy
worker. Adopting the state on the event loop in steps of a block of ids instead of on a
thread measured no different (median 3.9 against 4.6 ms, lower in 5 of 8 pairs) while fewer
cold prompts were encoded in the same time, so it stays on a thread.

The workers load each tokenizer from a copy of its ``tokenizer.json`` text, so they encode
with exactly the gateway's tokenizer. The gateway starts them once its tokenizers are loaded
(:meth:`ColdPool.start`); they run only when nothing else wants the CPU
(:func:`idle_priority`), with two malloc arenas and freed memory handed back after each job
(as the gateway, :mod:`~ttftscope.gateway.runtime.heap`), and end within a second of the gateway
however it ends. A worker that dies (killed, out of memory) breaks the pool: its jobs raise
:class:`ColdPoolBroken`, the next job starts a new pool.

>>> pool = ColdPool(processes=1)
>>> key = pool.register(o200k_tok.hf)
>>> done = pool.submit(key, None, "hello world").result()
>>> done.state.text, done.stats.path, IdsJson(done.blocks).json()
(b'hello world', 'full', b'[24912,2375]')
>>> pool.close()
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing
import os
import threading
import time
from array import array
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers

from ttftscope.assets import cache_dir
from ttftscope.errors import ConfigError
from ttftscope.gateway.runtime.heap import limit_arenas, trim
from ttftscope.gateway.runtime.workpool import WORKER_NICE
from ttftscope.gateway.transport.idsbody import IdsJson
from ttftscope.tokenization.encoder_state import EncoderState
from ttftscope.tokenization.incremental import EncoderStats, IncrementalEncoder

# how often a worker checks that the gateway still runs
_WATCH_S = 0.5
# pools that died one after another, no job done between, before the gateway stops using
# worker processes (a tokenizer that cannot load, a memory limit every worker hits)
_GIVE_UP_AFTER = 3
log = logging.getLogger("ttftscope.gateway")


@dataclass(frozen=True)
class ColdResult:
    """What a worker sends back: the encoder's state, its stats for the call, and the ids'
    JSON in :class:`~ttftscope.gateway.transport.idsbody.IdsJson` blocks (serialized there too)."""

    state: EncoderState
    stats: EncoderStats
    blocks: list[bytes]


class ColdPoolBroken(Exception):
    """The job cannot be done by a worker: one died (killed, out of memory), which fails
    every job its pool held, or the pool was stopped or given up on. Encode on a thread."""


class ColdPool:
    """Up to ``processes`` worker processes for long encodes, started by :meth:`start` or
    the first job; ``required`` False (the gateway's "auto"): a tokenizer the workers cannot
    be given is encoded on threads instead of failing the start."""

    def __init__(self, *, processes: int, required: bool = True) -> None:
        self.processes, self.required = processes, required
        self.started = 0  # pools started (a broken one is replaced)
        self.submitted = 0  # jobs given to workers
        self.completed = 0  # jobs they sent a result back for
        self.given_up = False  # pools kept dying: jobs are refused (the threads encode)
        self._tokenizers: dict[str, tokenizers.Tokenizer] = {}  # key -> tokenizer
        self._files: dict[str, str] = {}  # key -> its tokenizer.json
        self._executor: ProcessPoolExecutor | None = None
        self._dead: ProcessPoolExecutor | None = None  # broken: a worker died
        self._loaded: Any = None  # shared array: pids of the current pool's loaded workers
        self._breaks = 0  # pools replaced since a job was last done

    def register(self, tok: tokenizers.Tokenizer) -> str:
        """The key under which jobs name ``tok`` (every tokenizer before the workers start).

        The workers load it from a copy of its ``tokenizer.json`` text, named by its hash
        under ``cache_dir()/tokenizers/workers``: exactly the gateway's tokenizer, whatever
        lies in the model folder by then. (Sent through the pipe that starts a worker, its
        5-10 MB kept the event loop writing until the new interpreter was up: ~0.5 s.)
        "" (jobs may not name it: encode it on threads) when that copy cannot be written and
        the pool is not ``required``.
        """
        if self._executor is not None:
            raise RuntimeError("register every tokenizer before the encode workers start")
        for key, known in self._tokenizers.items():  # upstreams serving one model share it
            if known is tok:
                return key
        doc = tok.to_str().encode("utf-8", "surrogatepass")
        key = hashlib.sha256(doc).hexdigest()[:24]
        try:
            self._files[key] = str(_stored(doc, key))
        except ConfigError as exc:
            if self.required:
                raise
            log.warning("%s\n  long prompts are encoded on threads instead", exc)
            return ""
        self._tokenizers[key] = tok
        return key

    @property
    def registered(self) -> int:
        """How many tokenizers jobs may name."""
        return len(self._files)

    @property
    def pids(self) -> list[int]:
        """The current pool's workers that have loaded their tokenizers (ready for jobs)."""
        loaded, executor = self._loaded, self._executor
        if loaded is None or executor is None or executor is self._dead:
            return []
        return [pid for pid in loaded[:] if pid]

    def start(self) -> None:
        """Start the workers now (each loads the tokenizers, ~1 s at low priority), so that
        no request waits for an interpreter to start.

        >>> pool = ColdPool(processes=1)
        >>> pool.start(); pool.started
        1
        >>> pool.close()
        """
        self._running()

    def submit(self, key: str, base: EncoderState | None, text: str) -> Future[ColdResult]:
        """Start encoding ``text`` in a worker, from ``base`` (an encoder's state) or from
        nothing; the future raises :class:`ColdPoolBroken` if no worker can do it."""
        outer: Future[ColdResult] = Future()
        # running from the start: a caller that stops waiting cannot cancel it, so whoever
        # counts it as work under way (WorkPool.await_admitted) does until the worker is done
        outer.set_running_or_notify_cancel()
        try:
            executor = self._running()
            try:
                inner = executor.submit(_encode_job, key, base, text)
            except BrokenProcessPool:  # broken since the last job: start anew, once
                self._dead = executor
                executor = self._running()
                inner = executor.submit(_encode_job, key, base, text)
        except (BrokenProcessPool, RuntimeError) as exc:  # RuntimeError: shut down
            outer.set_exception(ColdPoolBroken(f"no encode worker can take the job ({exc})"))
            return outer
        self.submitted += 1
        inner.add_done_callback(lambda done: self._settle(executor, done, outer))
        return outer

    def _settle(
        self, executor: ProcessPoolExecutor, done: Future[ColdResult], outer: Future[ColdResult]
    ) -> None:
        """On the pool's own thread: ``outer`` gets the job's result, or the reason a worker
        could not give it as :class:`ColdPoolBroken` (never a bare cancellation, which asyncio
        would take for its own)."""
        if done.cancelled():
            outer.set_exception(ColdPoolBroken("the encode workers stopped with this job queued"))
            return
        exc = done.exception()
        if isinstance(exc, BrokenProcessPool):
            self._dead = executor  # replaced at the next job
            exc = ColdPoolBroken(f"an encode worker process died, and its pool's jobs ({exc})")
        if exc is not None:
            outer.set_exception(exc)
            return
        self.completed += 1
        self._breaks = 0
        outer.set_result(done.result())

    def _running(self) -> ProcessPoolExecutor:
        if self._executor is not None and self._executor is self._dead:
            self._stop()
            self._breaks += 1
            if self._breaks >= _GIVE_UP_AFTER and not self.given_up:
                self.given_up = True
                log.error(
                    "encode worker processes died %d times in a row without a job done: "
                    "long prompts are encoded on threads from now on (see the log above for "
                    "why; restart the gateway, or set gateway.encode_processes = 0)",
                    self._breaks,
                )
        if self.given_up:
            raise RuntimeError("the encode workers were given up on")
        if self._executor is None:
            self._executor = self._new_pool()
        return self._executor

    def _new_pool(self) -> ProcessPoolExecutor:
        for key, tok in self._tokenizers.items():  # a cache cleaner may have removed its file
            if not Path(self._files[key]).exists():
                _stored(tok.to_str().encode("utf-8", "surrogatepass"), key)
        # spawn: the gateway has threads (a fork could copy a held lock) and workers should
        # not carry its memory
        context = multiprocessing.get_context("spawn")
        self._loaded = context.Array("i", self.processes)
        executor = ProcessPoolExecutor(
            self.processes,
            mp_context=context,
            initializer=_start_worker,
            initargs=(os.getpid(), self._files, self._loaded),
        )
        self.started += 1
        for _ in range(self.processes):  # the executor starts a worker for each job
            executor.submit(_ready)
        return executor

    def _stop(self, *, wait: bool = False) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=True)

    def close(self, *, wait: bool = False) -> None:
        """Stop the workers: they finish the job in hand, if any (``wait``: return once
        they have)."""
        self._stop(wait=wait)


def _stored(doc: bytes, key: str) -> Path:
    """``doc`` as a file named by its hash in the cache (written once, atomically: several
    gateways may start at once)."""
    path = cache_dir() / "tokenizers" / "workers" / f"{key}.json"
    if path.exists():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{key}.{os.getpid()}.part")
        part.write_bytes(doc)
        part.replace(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the encode workers' copy of a tokenizer to {path}: {exc}",
            hint="set TTFTSCOPE_CACHE_DIR to a writable folder, or gateway.encode_processes = 0",
        ) from None
    return path


# --- in the worker process ------------------------------------------------------------------
_LOADED: dict[str, tokenizers.Tokenizer] = {}


def _start_worker(parent: int, files: dict[str, str], loaded: Any) -> None:
    """Lower this process's priority, die with the gateway, load the tokenizers, and say so
    in ``loaded`` (a shared array of pids, one slot per worker)."""
    idle_priority()
    limit_arenas(2)  # as the gateway: see :mod:`~ttftscope.gateway.runtime.heap`
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    for key, path in files.items():
        _LOADED[key] = tokenizers.Tokenizer.from_file(path)
    with loaded.get_lock():
        slots = loaded[:]
        if 0 in slots:
            loaded[slots.index(0)] = os.getpid()


def idle_priority() -> str:
    """Run this process only when no other wants the CPU: Linux's ``SCHED_IDLE`` (which the
    kernel preempts at once for any normal task that wakes), else :data:`WORKER_NICE` nice
    steps down; which one it got. A worker shares no GIL with the gateway, so nothing of
    the gateway's ever waits for it (the figures are in this module's docstring).

    >>> import subprocess, sys
    >>> code = "from ttftscope.gateway.runtime import coldpool; print(coldpool.idle_priority())"
    >>> run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    >>> run.stdout.strip() == ("idle" if sys.platform.startswith("linux") else "nice")
    True
    """
    policy = getattr(os, "SCHED_IDLE", None)
    if policy is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))
            return "idle"
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
        return "nice"
    return "normal"


def _watch(parent: int) -> None:
    """End this process soon after the gateway ends, however it ends (a gateway killed by
    the OOM killer or ``kill -9`` runs no shutdown code): it is then adopted by another."""
    while os.getppid() == parent:
        time.sleep(_WATCH_S)
    os._exit(0)


def _ready() -> None:
    """A job that only makes the executor start a worker (readiness is in ``loaded``)."""


def _encode_job(key: str, base: EncoderState | None, text: str) -> ColdResult:
    enc = IncrementalEncoder(_LOADED[key])
    if base is not None:
        enc.adopt(base)
    try:
        ids = enc.encode(text)
        json = IdsJson()
        json.update(ids, 0)
        if enc.utf8:
            return ColdResult(enc.snapshot(), enc.stats, json.blocks)
        # served by a plain full encode: ids only, nothing to cache
        return ColdResult(
            EncoderState(b"", array("I", ids).tobytes(), None), enc.stats, json.blocks
        )
    finally:
        trim()  # what the encode freed goes back to the system: workers idle between jobs
