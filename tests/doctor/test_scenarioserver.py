"""The truth table's stand-in queues as an engine with slots does (issue 35): the time a
request waits is what the load's concurrency makes it, measured by the server, not a fixed
wait it injects."""

from __future__ import annotations

import asyncio

import httpx

from tests.doctor.scenarioserver import MODEL, Costs, ScenarioServer

DECODE_S = 0.2


async def _chat(client: httpx.AsyncClient, root: str, i: int) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"turn {i}"}], "stream": True}
    async with client.stream("POST", f"{root}/v1/chat/completions", json=body) as answer:
        async for _ in answer.aiter_bytes():
            pass


async def _load(root: str, concurrent: int, rounds: int = 1) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        for r in range(rounds):
            await asyncio.gather(
                *(_chat(client, root, r * concurrent + i) for i in range(concurrent))
            )


def _waits(costs: Costs, concurrent: int, rounds: int = 1) -> list[float]:
    with ScenarioServer(costs) as srv:
        asyncio.run(_load(srv.root, concurrent, rounds))
        return sorted(c.queue_ms for c in srv.charged)


def test_four_at_once_on_two_slots_two_wait_for_a_slot() -> None:
    waits = _waits(Costs(slots=2, decode_s=DECODE_S), concurrent=4)
    # the first two take the slots; the other two wait until one is freed, after its decode
    assert all(w < 500 * DECODE_S for w in waits[:2]), waits
    assert all(w >= 500 * DECODE_S for w in waits[2:]), waits


def test_one_at_a_time_nobody_waits() -> None:
    waits = _waits(Costs(slots=2, decode_s=DECODE_S), concurrent=1, rounds=4)
    assert len(waits) == 4 and all(w < 500 * DECODE_S for w in waits), waits


def test_as_many_slots_as_requests_nobody_waits() -> None:
    waits = _waits(Costs(slots=4, decode_s=DECODE_S), concurrent=4)
    assert len(waits) == 4 and all(w < 500 * DECODE_S for w in waits), waits
