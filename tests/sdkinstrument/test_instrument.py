"""instrument(client): the SDK's answers are untouched and every call becomes a record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from tests.sdkinstrument.fakevllm import FakeVllm
from ttftscope import Settings, instrument, instrumentation
from ttftscope.config.schema import DebugSettings, ObservabilitySettings
from ttftscope.records import RequestRecord, read_records

KEY = "sk-instrument-test-0123456789"
MESSAGES: Any = [{"role": "user", "content": "hi"}]
TOKENS = Settings(debug=DebugSettings(log_token_count=True))


@pytest.fixture
def server() -> Iterator[FakeVllm]:
    with FakeVllm(chunk_delay_s=0.005) as srv:
        yield srv


def _records(client: Any) -> list[RequestRecord]:
    handle = instrumentation(client)
    assert handle.flush()
    return handle.records


def _dumps(items: Any) -> list[dict[str, Any]]:
    return [c.model_dump() for c in items]


def test_sync_calls_return_what_the_sdk_returns(server: FakeVllm) -> None:
    with OpenAI(api_key=KEY, base_url=server.base_url) as plain:
        want = plain.chat.completions.create(model="tiny", messages=MESSAGES)
        want_chunks = _dumps(
            plain.chat.completions.create(model="tiny", messages=MESSAGES, stream=True)
        )
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=TOKENS) as client:
        got = client.chat.completions.create(model="tiny", messages=MESSAGES)
        stream = client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True)
        assert type(stream) is openai.Stream
        assert isinstance(stream.response, httpx2.Response)
        with stream as s:
            got_chunks = _dumps(s)
        instrumentation(client).close()
    assert type(got) is type(want) and got.model_dump() == want.model_dump()
    assert got_chunks == want_chunks


def test_a_streamed_chat_call_records_ttft_total_and_the_server_view(server: FakeVllm) -> None:
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=TOKENS) as client:
        for _ in client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True):
            pass
        [rec] = _records(client)
        instrumentation(client).close()
    assert rec.run_id.startswith("instrument-") and rec.notes[0] == "instrument"
    assert (rec.index, rec.variant, rec.phase, rec.ok, rec.status) == (0, "chat", "warm", True, 200)
    assert rec.model == "tiny" and rec.t_wall is not None
    assert rec.headers_ms is not None and rec.client_ttft_ms is not None
    assert rec.e2el_ms is not None and rec.headers_ms <= rec.client_ttft_ms <= rec.e2el_ms
    assert rec.content_chunks == 3
    assert rec.queue_ms == pytest.approx(5.0) and rec.prefill_ms == pytest.approx(10.0)
    assert rec.server_ttft_ms == pytest.approx(20.0) and rec.prefix_hit_rate == 0.5
    assert rec.prompt_tokens == server.prompt_tokens  # from /metrics: the stream had no usage


def test_a_non_streamed_call_records_its_total_and_usage(server: FakeVllm) -> None:
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=TOKENS) as client:
        client.completions.create(model="tiny", prompt="hello")
        client.completions.create(model="tiny", prompt=[1, 2, 3])
        text, ids = _records(client)
        instrumentation(client).close()
    assert (text.variant, ids.variant, ids.index) == ("text", "ids", 1)
    assert text.client_ttft_ms is None  # not observable without a stream
    assert text.e2el_ms is not None and text.e2el_ms == text.last_byte_ms
    assert (text.prompt_tokens, text.completion_tokens) == (12, 3)
    assert text.queue_ms == pytest.approx(5.0)


@pytest.mark.asyncio
async def test_async_calls_stream_and_not(server: FakeVllm) -> None:
    async with AsyncOpenAI(api_key=KEY, base_url=server.base_url) as plain:
        want = await plain.chat.completions.create(model="tiny", messages=MESSAGES)
        want_chunks = [
            c.model_dump()
            async for c in await plain.chat.completions.create(
                model="tiny",
                messages=MESSAGES,
                stream=True,
            )
        ]
    client = instrument(AsyncOpenAI(api_key=KEY, base_url=server.base_url), settings=TOKENS)
    async with client:
        got = await client.chat.completions.create(model="tiny", messages=MESSAGES)
        # think time: the worker records (and scrapes for) this call before the next starts
        assert await asyncio.to_thread(instrumentation(client).flush)
        stream = await client.chat.completions.create(
            model="tiny",
            messages=MESSAGES,
            stream=True,
        )
        assert type(stream) is openai.AsyncStream
        async with stream as s:
            got_chunks = [c.model_dump() async for c in s]
        full, streamed = _records(client)
        instrumentation(client).close()
    assert got.model_dump() == want.model_dump() and got_chunks == want_chunks
    assert full.e2el_ms is not None and full.client_ttft_ms is None
    assert streamed.client_ttft_ms is not None and streamed.e2el_ms is not None
    assert streamed.queue_ms == pytest.approx(5.0) and streamed.prompt_tokens == 12


def test_next_and_close_work_on_an_instrumented_stream(server: FakeVllm) -> None:
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=TOKENS) as client:
        stream = client.completions.create(model="tiny", prompt="hi", stream=True)
        first = next(stream)
        second = next(stream)
        stream.close()
        [rec] = _records(client)
        instrumentation(client).close()
    assert first.choices[0].text == "Hel" and second.choices[0].text == "lo"
    assert rec.ok and rec.client_ttft_ms is not None and rec.e2el_ms is None
    assert any("before its end" in n for n in rec.notes)


def test_records_and_request_bodies_go_to_files_without_keys(
    server: FakeVllm, tmp_path: Path
) -> None:
    obs = ObservabilitySettings(records_dir=tmp_path / "out", log_requests=True)
    settings = Settings(observability=obs)
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=settings) as client:
        client.chat.completions.create(
            model="tiny",
            messages=MESSAGES,
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
            extra_headers={"x-secret": "hidden"},
            extra_body={"top_k": 3},
        )
        assert instrumentation(client).close()
    [rec] = read_records(tmp_path / "out" / "instrument.jsonl")
    assert rec.variant == "chat" and rec.queue_ms == pytest.approx(5.0)
    [line] = (tmp_path / "out" / "requests.jsonl").read_text().splitlines()
    logged = json.loads(line)
    assert logged["index"] == 0 and logged["endpoint"] == "chat"
    assert logged["body"] == {**server.requests[0]}
    assert KEY not in line and "hidden" not in line


def test_the_flags_switch_each_part_off(server: FakeVllm) -> None:
    obs = ObservabilitySettings(record_ttft=False, record_queue_ms=False)
    with instrument(
        OpenAI(api_key=KEY, base_url=server.base_url), settings=Settings(observability=obs)
    ) as client:
        list(client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True))
        [rec] = _records(client)
        instrumentation(client).close()
    assert rec.ok and rec.client_ttft_ms is None and rec.e2el_ms is None
    assert rec.queue_ms is None and rec.server_ttft_ms is None
    assert rec.prompt_tokens is None  # debug.log_token_count is off by default


def test_instrumenting_twice_changes_nothing_and_close_unwraps(server: FakeVllm) -> None:
    with OpenAI(api_key=KEY, base_url=server.base_url) as client:
        assert instrument(instrument(client, settings=TOKENS), settings=TOKENS) is client
        client.completions.create(model="tiny", prompt="hi")
        handle = instrumentation(client)
        assert handle.close() and len(handle.records) == 1
        client.completions.create(model="tiny", prompt="hi")
        assert handle.stats.calls == 1


def test_back_to_back_calls_get_right_server_values_or_none(server: FakeVllm) -> None:
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=TOKENS) as client:
        for _ in range(6):
            list(client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True))
        records = _records(client)
        instrumentation(client).close()
    assert len(records) == 6
    for rec in records:
        assert rec.queue_ms is None or rec.queue_ms == pytest.approx(5.0)
        assert rec.prefill_ms is None or rec.prefill_ms == pytest.approx(10.0)
        assert rec.server_ttft_ms is None or rec.server_ttft_ms == pytest.approx(20.0)
        assert rec.prompt_tokens in (None, server.prompt_tokens)
