"""Pacing: Poisson gaps with the asked mean, nothing banked, stoppable sleeps."""

from __future__ import annotations

import asyncio
import itertools
import math
import statistics

from hypothesis import given
from hypothesis import strategies as st

from ttftscope.bench.send.pacing import Pacer, Slots, sleep_until


@given(st.floats(0.5, 500), st.integers(0, 2**32))
def test_gaps_are_exponential_with_mean_one_over_rate(rate: float, seed: int) -> None:
    pacer = Pacer(rate, seed, clock=lambda: 0.0)
    slots = [pacer.next_slot() for _ in range(3000)]
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert all(g >= 0 for g in gaps)
    assert math.isclose(statistics.mean(gaps), 1 / rate, rel_tol=0.1)
    # exponential: the standard deviation equals the mean
    assert math.isclose(statistics.pstdev(gaps), 1 / rate, rel_tol=0.15)
    assert Pacer(rate, seed, clock=lambda: 0.0).next_slot() == 0.0


def test_an_infinite_rate_never_waits_and_a_stall_is_not_banked() -> None:
    now = [0.0]
    assert Pacer(math.inf, 1, clock=lambda: now[0]).next_slot() == 0.0
    pacer = Pacer(10.0, 1, clock=lambda: now[0])
    pacer.next_slot()
    now[0] = 100.0  # every session was busy for 100 s: no burst of 1000 sends follows
    first, second = pacer.next_slot(), pacer.next_slot()
    assert first == 100.0 and second >= 100.0 and second - first < 5


def test_sleeps_end_at_once_when_the_run_stops() -> None:
    async def main() -> tuple[bool, bool]:
        stop = asyncio.Event()
        # the clock never moves: only the stop can end a sleep an hour long
        sleeper = asyncio.create_task(sleep_until(3600.0, stop, lambda: 0.0))
        await asyncio.sleep(0)  # let it start sleeping
        was_sleeping = not sleeper.done()
        stop.set()
        return was_sleeping, await sleeper

    was_sleeping, ok = asyncio.run(main())
    assert was_sleeping and not ok
    assert not asyncio.run(sleep_until(3600.0, _set_event(), lambda: 0.0))  # set before: no sleep


def _set_event() -> asyncio.Event:
    stop = asyncio.Event()
    stop.set()
    return stop


def test_slots_cap_requests_in_flight() -> None:
    async def main() -> tuple[int, list[float]]:
        slots = Slots(2)
        waits: list[float] = []

        async def one() -> None:
            async with slots.hold() as waited:
                waits.append(waited)
                await asyncio.sleep(0.05)

        await asyncio.gather(*(one() for _ in range(6)))
        return slots.peak, waits

    peak, waits = asyncio.run(main())
    assert peak == 2 and sorted(waits)[-1] >= 80  # the last two waited for two turns
