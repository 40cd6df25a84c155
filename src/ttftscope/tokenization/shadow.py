"""Shadow verification: re-check some incremental results against a full encode, off the
caller's latency path.

A wrong id is a silent correctness bug in someone's traffic, so an encoder can re-check every
Nth result. The full encode (~150 ms at 100K tokens) runs on a :data:`Runner`: by default one
background thread shared by every encoder (HF encodes release the GIL); the gateway passes its
work pool's bounded background slot instead, so checks share the pool's threads and are
skipped, not queued, while one is still running. Outcomes are collected on the caller's
thread, so the encoder's state is only ever touched by its owner.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

# One worker for the whole process: checks are rare and must never take more than one core.
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ttftscope-shadow")
# Runs one check somewhere off the caller's thread; None when it declines (the check is skipped).
Runner = Callable[[Callable[[], bool]], Future[bool] | None]


class ShadowChecks:
    """Pending background comparisons of returned ids with a full encode.

    >>> checks = ShadowChecks()
    >>> checks.submit(lambda: [1, 2], [1, 2]), checks.collect(wait=True)
    (True, (1, 0))
    >>> ShadowChecks(lambda job: None).submit(lambda: [1], [1])  # the runner declined
    False
    """

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner: Runner = runner or _POOL.submit
        self._pending: list[Future[bool]] = []

    def submit(self, full_encode: Callable[[], list[int]], returned: list[int]) -> bool:
        """Start one check; ``returned`` must be the caller's own copy. False when the
        runner declined it (busy): the check is skipped."""
        future = self.runner(lambda: full_encode() == returned)
        if future is None:
            return False
        self._pending.append(future)
        return True

    def collect(self, *, wait: bool) -> tuple[int, int]:
        """``(checks finished, mismatches among them)`` since the last call."""
        done = [f for f in self._pending if wait or f.done()]
        self._pending = [f for f in self._pending if f not in done]
        return len(done), sum(not f.result() for f in done)
