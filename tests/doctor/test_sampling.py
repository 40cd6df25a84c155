"""The live queue: ``/metrics`` scraped over a window, on a fake clock (no real waiting)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest

from tests.doctor.queueserver import QueueServer
from ttftscope.doctor.sampling import LiveSamples, Sampling, sample_queue


class FakeTime:
    """A clock that only moves when the sampler sleeps: the window passes instantly."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def sample(
    waiting: Sequence[float], seconds: float, progress: list[tuple[int, int]]
) -> LiveSamples:
    fake = FakeTime()
    how = Sampling(
        seconds=seconds,
        interval_s=0.5,
        on_sample=lambda done, total: progress.append((done, total)),
        sleep=fake.sleep,
        clock=fake.clock,
    )

    async def go(url: str) -> LiveSamples:
        async with httpx.AsyncClient() as client:
            return await sample_queue(url, client, how)

    with QueueServer(waiting) as srv:
        return asyncio.run(go(f"{srv.root}/metrics"))


def test_a_window_is_scraped_every_half_second_both_ends_included() -> None:
    progress: list[tuple[int, int]] = []
    got = sample([6], seconds=2.0, progress=progress)
    assert got.waiting == [6, 6, 6, 6, 6]
    assert got.seconds == pytest.approx(2.0)
    assert progress == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert got.samples[0].running == 4 and got.samples[0].kv_usage == 0.25


def test_the_figures_name_min_median_max_and_the_share_above_zero() -> None:
    got = sample([0, 3, 6, 6, 0], seconds=2.0, progress=[])
    assert got.waiting == [0, 3, 6, 6, 0] and got.waited_share == pytest.approx(0.6)
    assert got.figures() == (
        "waiting 0 / 3 / 6 (min / median / max) over 5 scrapes in 2.0 s; above 0 in 60%"
    )


def test_the_queue_time_of_requests_finished_in_the_window_comes_from_the_histogram() -> None:
    got = sample([6], seconds=1.0, progress=[])  # 3 scrapes: 2 requests of 200 ms finished
    assert got.finished == 2 and got.mean_queue_ms == pytest.approx(200.0)


def test_the_window_length_is_configurable() -> None:
    assert Sampling(seconds=5.0).count == 11
    assert Sampling(seconds=0.0).count == 1
    assert Sampling(seconds=1.2, interval_s=0.4).count == 4
