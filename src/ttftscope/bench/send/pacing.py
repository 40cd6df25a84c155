"""When requests may go: Poisson pacing, a concurrency cap, and stoppable sleeps.

Pacing is ``vllm bench serve``'s Poisson arrival process applied to sessions that can
only send once their previous turn is answered: consecutive sends are at least an
exponential gap apart (mean ``1 / rate``), drawn from the seed. While sessions are ready it
is exactly a Poisson process; when all are busy nothing is banked, so a stall is never
followed by a burst the server would not see from real agents.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import AsyncIterator, Callable


async def sleep_until(when: float, stop: asyncio.Event, clock: Callable[[], float]) -> bool:
    """Sleep until monotonic time ``when``; False at once when ``stop`` is set meanwhile.

    >>> asyncio.run(sleep_until(0.0, asyncio.Event(), time.monotonic))
    True
    """
    delay = when - clock()
    if stop.is_set():
        return False
    if delay <= 0:
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)
    return not stop.is_set()


class Pacer:
    """Hands out send times: consecutive ones at least an exponential gap apart.

    >>> p = Pacer(rate=2.0, seed=1, clock=lambda: 0.0)
    >>> [round(p.next_slot(), 3) for _ in range(3)]
    [0.0, 0.726, 1.179]
    >>> Pacer(rate=math.inf, seed=1, clock=lambda: 5.0).next_slot()
    5.0
    """

    def __init__(self, rate: float, seed: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.clock = rate, clock
        self._rng = random.Random(f"{seed}-arrivals")
        self._next: float | None = None

    def next_slot(self) -> float:
        """The time the next send may go (now or later); the one after is drawn too."""
        now = self.clock()
        if math.isinf(self.rate):
            return now
        slot = now if self._next is None else max(now, self._next)
        self._next = slot + self._rng.expovariate(self.rate)
        return slot

    async def wait(self, deadline: float, stop: asyncio.Event) -> bool:
        """Wait for this send's slot; False when the run stops or the slot is too late."""
        slot = self.next_slot()
        if slot >= deadline:
            return False
        return await sleep_until(slot, stop, self.clock)


class Slots:
    """At most ``limit`` requests in flight (no limit when None); reports each wait.

    >>> async def main() -> float:
    ...     async with Slots(1).hold() as waited_ms:
    ...         return waited_ms
    >>> asyncio.run(main()) >= 0  # a free slot: held at once, the wait is still reported
    True
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._sem = asyncio.Semaphore(limit) if limit is not None else None
        self.in_flight = 0
        self.peak = 0  # most requests in flight at once

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[float]:
        """Hold one slot for the block; yields how long it waited for it (ms)."""
        t = time.perf_counter()
        if self._sem is not None:
            await self._sem.acquire()
        waited = (time.perf_counter() - t) * 1000.0
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            yield waited
        finally:
            self.in_flight -= 1
            if self._sem is not None:
                self._sem.release()
