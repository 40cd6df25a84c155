"""Where the gateway's long Python-side work runs: a bounded pool, off the event loop.

One cold 100K-token prompt costs 0.3-0.8 s of encoding and ~10 ms of template rendering; on
the event loop (or in a thread that holds the GIL, as HF's ``encode`` does) every other
client waits that long. The gateway runs such work here: a few worker threads (the encodes
release the GIL, see :mod:`ttftscope.tokenization.offsets`) and a bounded queue in front of
them. Workers run below the loop's scheduling priority (:data:`WORKER_NICE`, Linux, where a
thread has its own nice value): the window engines that encode a cold prompt run Python in
turns of at most the switch interval, so the loop, the clients and the upstream on the same
cores are not kept waiting by the system behind them. (When one GIL hold lasted 20-130 ms, a
preempted low-priority worker made the loop wait longer, 0.5-0.9 s, than an even share did;
those holds are now cut into steps, see :mod:`ttftscope.tokenization.offsets`.) A job that
finds the queue full is refused at once with :class:`Overloaded`, which the endpoints answer
as 503 with ``Retry-After``: a client told to come back beats a stall that grows with every
conversation that arrives.

Work nobody waits for (the session cache's shadow checks) takes the pool's one background
slot (:meth:`WorkPool.background`): it shares the pool's threads instead of adding a CPU-bound
thread of its own, and is skipped while the slot is taken, so it neither queues up nor ever
runs more than once at a time.

>>> pool = WorkPool(workers=1, queue=0)
>>> asyncio.run(pool.run(sum, [1, 2]))
3
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TypeVar

from ttftscope.gateway.runtime.heap import trim

T = TypeVar("T")
U = TypeVar("U")
# How long a thread running Python keeps the GIL while another asks for it (CPython's default:
# 5 ms). Workers run Python too (templates, the window encoder of a cold prompt's appends); at
# 5 ms the loop waited up to that long at each wake-up while they did. 1 ms lowered the loop's
# p99 lag under 6 cold 100K-token encodes in 7 of 8 paired runs, by a third to a half.
SWITCH_INTERVAL_S = 0.001
# How much lower the workers' priority is than the loop's (nice steps, Linux only). Paired runs
# of benchmarks/gateway_soak.py (6 cold 100K-token prompts at once, 2 shared cores, load
# 1.5-4.5): 10 lowered the small chats' p99 during the cold prompts in 16 of 17 pairs, to 0.6x
# (median); the cold and churn phases took as long (1.01x, 1.05x).
WORKER_NICE = 10


class Overloaded(Exception):
    """Every worker is busy and the queue is full; come back in ``retry_after_s`` seconds."""

    def __init__(self, retry_after_s: int, waiting: int) -> None:
        super().__init__(
            f"the gateway is encoding {waiting} long prompts; retry in {retry_after_s} s "
            "(gateway.encode_queue)"
        )
        self.retry_after_s = retry_after_s


class WorkPool:
    """``workers`` threads and room for ``queue`` more jobs waiting; the rest is refused."""

    def __init__(self, *, workers: int, queue: int) -> None:
        self.workers, self.queue = workers, queue
        self.pending = 0  # running or waiting, counted until the thread is done
        self.refused = 0
        self._mean_s = 0.5  # a job's recent mean duration, for Retry-After
        self._executor = ThreadPoolExecutor(
            workers, thread_name_prefix="ttftscope-encode", initializer=lower_priority
        )
        self._background_lock = threading.Lock()
        self._background_busy = False

    def admit(self) -> None:
        """Take a place for one job or raise :class:`Overloaded` (call on the event loop)."""
        if self.pending >= self.workers + self.queue:
            self.refused += 1
            rounds = math.ceil(self.pending / self.workers)
            raise Overloaded(max(1, math.ceil(rounds * self._mean_s)), self.pending)
        self.pending += 1

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker thread; :class:`Overloaded` when there is no room."""
        self.admit()
        return await self.run_admitted(fn, *args)

    async def run_admitted(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker, its place already taken with :meth:`admit`."""
        return await self.await_admitted(lambda: self._executor.submit(_then_trim, fn, *args))

    async def await_admitted(self, submit: Callable[[], Future[T]]) -> T:
        """The result of the job ``submit()`` starts, on these threads or elsewhere (a
        process pool), its place (taken with :meth:`admit`) held until the job ends, even if
        the caller stops waiting: a place stands for work under way.

        >>> pool = WorkPool(workers=1, queue=0)
        >>> elsewhere: Future[int] = Future(); elsewhere.set_result(2)
        >>> async def job() -> int:
        ...     pool.admit()
        ...     return await pool.await_admitted(lambda: pool.then(elsewhere, lambda n: n + 1))
        >>> asyncio.run(job()), pool.pending
        (3, 0)
        >>> pool.close()
        """
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()

        def done(_: Future[T]) -> None:  # on the worker thread: the place frees when it ends
            with contextlib.suppress(RuntimeError):  # the loop closed first (shutdown)
                loop.call_soon_threadsafe(self._release, time.perf_counter() - t0)

        try:
            future = submit()
        except BaseException:
            self._release(0.0)
            raise
        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def then(
        self,
        first: Future[T],
        fn: Callable[[T], U],
        recover: Callable[[BaseException], U] | None = None,
    ) -> Future[U]:
        """``fn(result of first)`` on a worker thread once ``first`` (work done elsewhere, a
        process) is done: one future for both, for :meth:`await_admitted`, so one place
        covers both. If ``first`` failed, ``recover(its error)`` runs there instead (it may
        raise it again); without ``recover`` the error is the future's.

        >>> pool = WorkPool(workers=1, queue=0)
        >>> first: Future[int] = Future()
        >>> both = pool.then(first, lambda n: n + 1)
        >>> first.set_result(1); both.result()
        2
        >>> failed: Future[int] = Future()
        >>> redone = pool.then(failed, lambda n: n + 1, recover=lambda exc: -1)
        >>> failed.set_exception(ValueError("lost")); redone.result()
        -1
        >>> pool.close()
        """
        out: Future[U] = Future()
        out.set_running_or_notify_cancel()  # like ``first``: under way, not cancellable

        def go(done: Future[T]) -> None:
            try:
                if done.cancelled() or done.exception() is None or recover is None:
                    job = self._executor.submit(_then_trim, fn, done.result())
                else:
                    job = self._executor.submit(_then_trim, recover, done.exception())
                job.add_done_callback(lambda f: _settle(f, out))
            except BaseException as exc:  # first's error or cancellation, or shut down
                out.set_exception(_not_cancelled(exc))

        first.add_done_callback(go)
        return out

    def background(self, fn: Callable[[], T]) -> Future[T] | None:
        """``fn()`` on a worker if the background slot is free, else None (not run); from
        any thread.

        >>> pool = WorkPool(workers=1, queue=0)
        >>> pool.background(lambda: 2).result()
        2
        """
        with self._background_lock:
            if self._background_busy:
                return None
            self._background_busy = True
        try:
            future = self._executor.submit(fn)
        except RuntimeError:  # shut down
            self._free_background()
            return None
        future.add_done_callback(lambda _: self._free_background())
        return future

    def _free_background(self) -> None:
        with self._background_lock:
            self._background_busy = False

    def _release(self, seconds: float) -> None:
        self.pending -= 1
        if seconds > 0:
            self._mean_s = 0.8 * self._mean_s + 0.2 * seconds

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def lower_priority(steps: int = WORKER_NICE) -> bool:
    """Run the calling thread ``steps`` nice steps below where it is (at most 19); whether it
    could (Linux only: elsewhere a thread has no nice value of its own, and the call would
    reach the whole process).

    >>> import threading
    >>> seen: list[bool] = []
    >>> worker = threading.Thread(target=lambda: seen.append(lower_priority()))
    >>> worker.start(); worker.join()
    >>> seen == [sys.platform.startswith("linux")]  # that thread alone now runs at nice 10
    True
    """
    if not sys.platform.startswith("linux"):
        return False
    me = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, me)
        os.setpriority(os.PRIO_PROCESS, me, min(19, now + steps))
    except OSError:  # a sandbox refusing it: the worker keeps the loop's priority
        return False
    return True


def _settle(done: Future[T], out: Future[T]) -> None:
    """``out`` gets ``done``'s result or error."""
    if done.cancelled():
        out.set_exception(_not_cancelled(CancelledError()))
    elif (exc := done.exception()) is not None:
        out.set_exception(exc)
    else:
        out.set_result(done.result())


def _not_cancelled(exc: BaseException) -> BaseException:
    """``exc``, but a cancellation as an error: asyncio would take a ``CancelledError`` that
    reaches a task for the task's own and end it without an answer."""
    if isinstance(exc, CancelledError):
        return RuntimeError("the work pool was shut down with this job queued")
    return exc


def _then_trim(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, then the memory it freed goes back to the system (a long encode frees
    tens of MB; ~1 ms, with the GIL released)."""
    try:
        return fn(*args)
    finally:
        trim()
