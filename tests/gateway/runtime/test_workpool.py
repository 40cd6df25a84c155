"""The work pool's threads run below the event loop's priority (Linux: per-thread nice)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from concurrent.futures import Future

import pytest

from ttftscope.gateway.runtime.workpool import WORKER_NICE, WorkPool, lower_priority

BOUND_S = 30.0  # how long a test waits for a thread

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a thread has its own nice value on Linux only"
)


def _own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@linux_only
def test_jobs_run_below_the_callers_priority_and_the_caller_keeps_its_own() -> None:
    caller = _own_nice()
    pool = WorkPool(workers=2, queue=0)
    try:
        seen = asyncio.run(pool.run(_own_nice))
        background = pool.background(_own_nice)
        assert background is not None
        assert seen == background.result() == min(19, caller + WORKER_NICE)
        assert _own_nice() == caller  # the loop's thread is untouched
    finally:
        pool.close()


@linux_only
def test_lowering_is_relative_and_stops_at_19() -> None:
    seen: list[int] = []

    def worker() -> None:
        seen.append(_own_nice())
        assert lower_priority(3)
        seen.append(_own_nice())
        assert lower_priority(40)
        seen.append(_own_nice())

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    before, after_3, after_40 = seen
    assert after_3 == min(19, before + 3)
    assert after_40 == 19


def test_elsewhere_nothing_is_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, int]] = []
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(os, "setpriority", lambda *a: calls.append(a))
    assert lower_priority() is False
    assert calls == []  # on macOS a thread id passed as a pid could name another process


def test_a_refused_change_leaves_a_working_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: int) -> None:
        raise PermissionError("not permitted")

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(os, "setpriority", refuse)
    assert lower_priority() is False
    pool = WorkPool(workers=1, queue=0)
    try:
        assert asyncio.run(pool.run(sum, [1, 2])) == 3
    finally:
        pool.close()


def test_work_done_elsewhere_holds_its_place_until_its_follow_up_ends() -> None:
    """``then`` + ``await_admitted``: a job in a process, then its follow-up on a thread;
    the place stays taken until both are done, even once the caller stopped waiting."""
    pool = WorkPool(workers=1, queue=0)
    elsewhere: Future[int] = Future()
    elsewhere.set_running_or_notify_cancel()
    release = threading.Event()
    started = threading.Event()

    def follow_up(n: int) -> int:
        started.set()
        assert release.wait(BOUND_S)
        return n

    async def main() -> list[int]:
        pool.admit()
        job = asyncio.ensure_future(pool.await_admitted(lambda: pool.then(elsewhere, follow_up)))
        await asyncio.sleep(0)
        job.cancel()  # the client left: the work goes on, and keeps its place
        seen = [pool.pending]
        elsewhere.set_result(7)
        await asyncio.to_thread(started.wait, BOUND_S)
        seen.append(pool.pending)
        release.set()
        while pool.pending:  # freed by the follow-up's end, on this loop
            await asyncio.sleep(0.001)
        return seen

    try:
        assert asyncio.run(asyncio.wait_for(main(), BOUND_S)) == [1, 1]
    finally:
        pool.close()


def test_a_failure_elsewhere_is_recovered_on_a_thread_or_is_the_error() -> None:
    pool = WorkPool(workers=1, queue=0)
    try:
        failed: Future[int] = Future()
        failed.set_exception(ValueError("the worker's error"))
        with pytest.raises(ValueError, match="the worker's error"):
            pool.then(failed, lambda n: n).result()
        assert pool.then(failed, lambda n: n, recover=lambda exc: -1).result() == -1
        cancelled: Future[int] = Future()
        cancelled.cancel()
        with pytest.raises(RuntimeError, match="shut down"):  # never a bare cancellation
            pool.then(cancelled, lambda n: n).result()
    finally:
        pool.close()
