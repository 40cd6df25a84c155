"""Per-chunk stamps: each request sees only its own content chunks, at their arrival."""

from __future__ import annotations

import asyncio

import httpx
from hypothesis import given
from hypothesis import strategies as st

from tests.faultserver import FaultOptions, FaultServer
from ttftscope.bench.chunks import ChunkTimingTransport, carries_content, collect_stamps, gaps_ms
from ttftscope.client.stream import stream_completion


@given(st.text(max_size=20))
def test_a_chunk_carries_content_exactly_when_a_content_string_is_non_empty(text: str) -> None:
    import json

    event = json.dumps({"choices": [{"delta": {"content": text}}]}, ensure_ascii=False)
    assert carries_content(f"data: {event}\n\n".encode()) == (text != "")
    usage = b'data: {"choices": [], "usage": {"completion_tokens": 3}}\n\n'
    assert not carries_content(usage) and not carries_content(b"data: [DONE]\n\n")


def test_concurrent_requests_each_get_their_own_chunk_times() -> None:
    opts = FaultOptions(content=["a", "b", "c", "d"], chunk_delay_s=0.03)

    async def one(client: httpx.AsyncClient, base: str) -> list[float]:
        stamps = collect_stamps()
        result = await stream_completion(
            client,
            base_url=base,
            path="/chat/completions",
            body={"model": "tiny-llama", "messages": [{"role": "user", "content": "x"}]},
            api_key=None,
            timeout_s=10,
        )
        assert result.ok and len(stamps) == 4
        return gaps_ms(stamps)

    async def main(base: str) -> list[list[float]]:
        transport = ChunkTimingTransport(httpx.AsyncHTTPTransport())
        async with httpx.AsyncClient(transport=transport) as client:
            return await asyncio.gather(*(one(client, base) for _ in range(3)))

    with FaultServer(opts) as srv:
        gaps = asyncio.run(main(srv.base_url()))
    assert all(len(g) == 3 and all(25 <= x < 200 for x in g) for g in gaps)


def test_requests_that_do_not_collect_are_left_alone() -> None:
    async def main(base: str) -> bool:
        transport = ChunkTimingTransport(httpx.AsyncHTTPTransport())
        async with httpx.AsyncClient(transport=transport) as client:
            resp = await client.get(base + "/models")
            return resp.status_code == 200

    with FaultServer() as srv:
        assert asyncio.run(main(srv.base_url()))
