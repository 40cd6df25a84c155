"""instrument(client) when things go wrong: the user's call is never changed or broken."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import tokenizers
from openai import AsyncOpenAI, OpenAI

from tests.faultserver import FaultServer
from tests.sdkinstrument.fakevllm import FakeVllm
from ttftscope import Settings, instrument, instrumentation
from ttftscope.config.schema import ApiSettings, DebugSettings, TokenizerSettings
from ttftscope.records import RequestRecord
from ttftscope.sdkinstrument import calls as instrument_calls
from ttftscope.tokenization.loader import Tokenizer

KEY = "sk-instrument-test-0123456789"
MESSAGES: Any = [{"role": "user", "content": "one two three"}]


@pytest.fixture
def server() -> Iterator[FakeVllm]:
    with FakeVllm(chunk_delay_s=0.005) as srv:
        yield srv


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _records(client: Any) -> list[RequestRecord]:
    handle = instrumentation(client)
    assert handle.close()
    return handle.records


def _word_tokenizer() -> Tokenizer:
    vocab = {w: i for i, w in enumerate(["[UNK]", "user", ":", "one", "two", "three"])}
    hf = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
    return Tokenizer(hf, Path("words"), "words", chat_template=template)


def test_a_429_is_recorded_and_re_raised_as_the_sdks_own_error(server: FakeVllm) -> None:
    server.rate_limited = True
    client = instrument(
        OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0), settings=Settings()
    )
    with client, pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="tiny", messages=MESSAGES)
    assert type(caught.value) is openai.RateLimitError and caught.value.status_code == 429
    [rec] = _records(client)
    assert (rec.ok, rec.status, rec.error_kind, rec.retry_after) == (
        False,
        429,
        "rate_limited",
        "7",
    )
    assert rec.error is not None and "slow down" in rec.error and KEY not in rec.error


def test_an_unreachable_server_is_classified(server: FakeVllm) -> None:
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    client = instrument(OpenAI(api_key=KEY, base_url=url, max_retries=0), settings=Settings())
    with client, pytest.raises(openai.APIConnectionError):
        client.completions.create(model="tiny", prompt="hi")
    [rec] = _records(client)
    assert not rec.ok and rec.error_kind == "connection_refused"


def test_a_dead_metrics_url_never_breaks_calls(
    server: FakeVllm, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{_dead_port()}/metrics"
    settings = Settings(api=ApiSettings(metrics_url=dead))
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=settings) as client:
        for _ in range(2):
            reply = client.completions.create(model="tiny", prompt="hi")
            assert reply.choices[0].text == "Hello!"
        records = _records(client)
    assert [r.ok for r in records] == [True, True]
    assert all(r.queue_ms is None and r.e2el_ms is not None for r in records)
    assert all(any("no server metrics" in n for n in r.notes) for r in records)
    warned = [r for r in caplog.records if "no server metrics" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING


def test_a_missing_tokenizer_never_breaks_calls(
    server: FakeVllm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(tokenizer=TokenizerSettings(path=tmp_path / "nope"))
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=settings) as client:
        client.chat.completions.create(model="tiny", messages=MESSAGES)
        client.chat.completions.create(model="tiny", messages=MESSAGES)
        records = _records(client)
    assert all(r.ok and r.tokenize_ms is None for r in records)
    assert any("no client tokenizer" in n for n in records[0].notes)
    assert len([r for r in caplog.records if "tokeniz" in r.getMessage()]) == 1


def test_a_configured_tokenizer_times_client_tokenization(server: FakeVllm) -> None:
    settings = Settings(debug=DebugSettings(log_token_count=True))
    client = instrument(
        OpenAI(api_key=KEY, base_url=server.base_url),
        settings=settings,
        tokenizer=_word_tokenizer(),
    )
    with client:
        client.chat.completions.create(model="tiny", messages=MESSAGES)
        client.completions.create(model="tiny", prompt=[5, 6])
        chat, ids = _records(client)
    assert chat.tokenize_ms is not None and chat.tokenize_ms > 0
    assert chat.client_tokens == 5  # "user" ":" "one" "two" "three"
    assert ids.tokenize_ms is None and ids.client_tokens == 2


def test_our_own_failures_stay_out_of_the_call(
    server: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("bug in ttftscope")

    monkeypatch.setattr(instrument_calls, "_has_content", broken)
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=Settings()) as client:
        chunks = list(client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True))
        [rec] = _records(client)
    assert len(chunks) == 4 and rec.ok


@pytest.mark.asyncio
async def test_concurrent_calls_are_marked_not_attributable() -> None:
    with FakeVllm(chunk_delay_s=0.05) as srv:
        client = instrument(AsyncOpenAI(api_key=KEY, base_url=srv.base_url), settings=Settings())
        async with client:
            calls = [client.completions.create(model="tiny", prompt="hi") for _ in range(3)]
            replies = await asyncio.gather(*calls)
            records = _records(client)
    assert [r.choices[0].text for r in replies] == ["Hello!"] * 3
    assert len(records) == 3
    for rec in records:
        assert "concurrent: queue not attributable" in rec.notes
        assert rec.queue_ms is None and rec.e2el_ms is not None


def test_a_stream_dropped_unread_still_ends_its_record(server: FakeVllm) -> None:
    with instrument(OpenAI(api_key=KEY, base_url=server.base_url), settings=Settings()) as client:
        stream = client.completions.create(model="tiny", prompt="hi", stream=True)
        next(stream)
        stream.response.close()
        del stream
        gc.collect()  # the SDK's stream is in a reference cycle (its generator holds it)
        [rec] = _records(client)
    assert rec.client_ttft_ms is not None and rec.e2el_ms is None
    assert any("before its end" in n for n in rec.notes)


def test_a_401_that_echoes_the_key_never_puts_it_in_a_record(tmp_path: Path) -> None:
    with FaultServer() as srv:
        client = instrument(
            OpenAI(api_key=KEY, base_url=srv.base_url("unauthorized"), max_retries=0),
            settings=Settings(),
            records=tmp_path / "r.jsonl",
        )
        with client, pytest.raises(openai.AuthenticationError) as caught:
            client.completions.create(model="tiny-llama", prompt="hi")
        [rec] = _records(client)
    assert KEY in str(caught.value)  # the SDK's own error is untouched
    assert rec.error_kind == "auth_error" and rec.status == 401
    assert KEY not in (tmp_path / "r.jsonl").read_text()
