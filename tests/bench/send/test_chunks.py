"""Per-chunk stamps: each request sees only its own content chunks, at their arrival."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given
from hypothesis import strategies as st

from tests.faultserver import FaultOptions, FaultServer
from ttftscope.bench.send.chunks import carries_content
from ttftscope.bench.send.transport import StreamClient
from ttftscope.client.stream import StreamResult

BODY = b'{"model":"tiny-llama","messages":[{"role":"user","content":"x"}],"stream":true}'


@given(st.text(max_size=20))
def test_a_chunk_carries_content_exactly_when_a_content_string_is_non_empty(text: str) -> None:
    import json

    event = json.dumps({"choices": [{"delta": {"content": text}}]}, ensure_ascii=False)
    assert carries_content(f"data: {event}\n\n".encode()) == (text != "")
    usage = b'data: {"choices": [], "usage": {"completion_tokens": 3}}\n\n'
    assert not carries_content(usage) and not carries_content(b"data: [DONE]\n\n")


def test_concurrent_requests_each_get_their_own_chunk_times() -> None:
    # Two servers with 2 and 5 content chunks, two requests to each at once on one client.
    # Under CPU load chunks may be read late (gaps move) or several at once (fewer stamps),
    # so no gap is bounded; stamps mixed up between requests still show: a request would
    # hold more stamps than its own content events, or stamps from outside its own stream.
    delay_s = 0.03

    async def one(client: StreamClient, base: str) -> tuple[int, int, StreamResult, list[int]]:
        start = time.perf_counter_ns()
        result, stamps = await client.stream(
            base + "/chat/completions", BODY, api_key=None, timeout_s=10
        )
        return start, time.perf_counter_ns(), result, stamps

    async def main(bases: list[str]) -> list[tuple[int, int, StreamResult, list[int]]]:
        async with StreamClient(connections=2) as client:
            return await asyncio.gather(*(one(client, b) for b in bases for _ in range(2)))

    few = FaultOptions(content=["a", "b"], chunk_delay_s=delay_s)
    many = FaultOptions(content=["a", "b", "c", "d", "e"], chunk_delay_s=delay_s)
    with FaultServer(few) as a, FaultServer(many) as b:
        runs = asyncio.run(main([a.base_url(), b.base_url()]))
    assert [r.content_events for _, _, r, _ in runs] == [2, 2, 5, 5]
    for start, end, result, stamps in runs:
        assert result.ok and 1 <= len(stamps) <= result.content_events
        assert start <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= end
        # the last content chunk leaves the server (n - 1) delays after the first one
        # (less a little: timers may fire a clock tick early)
        assert stamps[-1] - start >= (result.content_events - 1) * delay_s * 0.9e9


def test_a_chunk_carries_content_by_its_api_rules() -> None:
    start = b'data: {"type":"message_start","message":{"content":[],"usage":{}}}\n\n'
    block = b'data: {"type":"content_block_start","content_block":{"type":"text","text":""}}\n\n'
    delta = b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}\n\n'
    args = b'data: {"type":"content_block_delta","delta":{"partial_json":"{\\"a\\""}}\n\n'
    assert [carries_content(c, "messages") for c in (start, block, delta, args)] == [
        False,
        False,
        True,
        True,
    ]
    added = b'data: {"type":"response.content_part.added","part":{"text":""}}\n\n'
    text = b'data: {"type":"response.output_text.delta","delta":"Hi"}\n\n'
    done = b'data: {"type":"response.output_text.done","text":"Hi"}\n\n'
    completed = b'data: {"type":"response.completed","response":{"output":[{"text":"Hi"}]}}\n\n'
    assert [carries_content(c, "responses") for c in (added, text, done, completed)] == [
        False,
        True,
        False,
        False,
    ]
