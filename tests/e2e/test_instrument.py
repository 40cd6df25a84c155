"""instrument(client) on the official openai SDK against the real local vLLM."""

from __future__ import annotations

import time
from typing import Any

import pytest
from openai import AsyncOpenAI, OpenAI

from ttftscope import Settings, instrument, instrumentation
from ttftscope.config.schema import DebugSettings
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.records import RequestRecord

pytestmark = pytest.mark.e2e

SETTINGS = Settings(debug=DebugSettings(log_token_count=True))
SYSTEM = "You are a coding agent. Answer briefly. " * 20


def _conversations(n: int) -> list[Any]:
    history: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    out = []
    for i in range(n):
        history = [*history, {"role": "user", "content": f"Step {i}: list the files, please."}]
        out.append(history)
        history = [*history, {"role": "assistant", "content": f"Done with step {i}."}]
    return out


def _server_prompt_tokens(vllm: LocalServer, messages: Any) -> int:
    with OpenAI(api_key="EMPTY", base_url=vllm.base_url, max_retries=0) as plain:
        reply = plain.chat.completions.create(model=vllm.model, messages=messages, max_tokens=1)
    assert reply.usage is not None
    return reply.usage.prompt_tokens


def _records(client: Any) -> list[RequestRecord]:
    handle = instrumentation(client)
    assert handle.close(timeout=60)
    return handle.records


def test_sequential_streams_get_queue_prefill_and_the_servers_token_count(
    vllm: LocalServer,
) -> None:
    prompts = _conversations(4)
    expected = [_server_prompt_tokens(vllm, m) for m in prompts]
    client = instrument(
        OpenAI(api_key="EMPTY", base_url=vllm.base_url, max_retries=0),
        settings=SETTINGS,
        tokenizer=model_dir(),
    )
    with client:
        for messages in prompts:
            stream = client.chat.completions.create(
                model=vllm.model, messages=messages, max_tokens=8, stream=True
            )
            assert sum(1 for _ in stream) > 0
            time.sleep(0.3)  # an agent's tool run between calls
        records = _records(client)
    assert len(records) == len(prompts)
    for rec, tokens in zip(records, expected, strict=True):
        assert rec.ok and rec.variant == "chat" and "instrument" in rec.notes
        assert rec.client_ttft_ms is not None and rec.e2el_ms is not None
        assert rec.queue_ms is not None and rec.queue_ms >= 0, rec.notes
        assert rec.prefill_ms is not None and rec.prefill_ms > 0, rec.notes
        assert rec.server_ttft_ms is not None
        assert rec.server_ttft_ms <= rec.client_ttft_ms + 1.0
        assert rec.prompt_tokens == tokens  # from /metrics: the stream carried no usage
        assert rec.tokenize_ms is not None and rec.client_tokens == tokens
        assert rec.checks.get("queue_prefill_le_server_ttft") is True


@pytest.mark.asyncio
async def test_async_back_to_back_calls_never_get_wrong_server_values(
    vllm: LocalServer,
) -> None:
    prompts = _conversations(4)
    client = instrument(
        AsyncOpenAI(api_key="EMPTY", base_url=vllm.base_url, max_retries=0), settings=SETTINGS
    )
    async with client:
        for messages in prompts:
            reply = await client.chat.completions.create(
                model=vllm.model, messages=messages, max_tokens=4
            )
            assert reply.choices
        records = _records(client)
    assert [r.ok for r in records] == [True] * len(prompts)
    for rec in records:
        assert rec.e2el_ms is not None and rec.client_ttft_ms is None
        if rec.queue_ms is not None and rec.prefill_ms is not None:
            assert rec.queue_ms + rec.prefill_ms <= rec.e2el_ms + 1.0
        if rec.server_ttft_ms is not None:
            assert rec.checks.get("queue_prefill_le_server_ttft") is True
