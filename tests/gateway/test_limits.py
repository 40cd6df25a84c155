"""What keeps one client's big conversation from stalling or starving the rest: long encodes
off the event loop, admission control (503 + Retry-After), bounds on messages and prompt
length, one tokenizer per model folder, and what a cached conversation costs in bytes."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from ttftscope.agenttext import agent_turn
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.gateway.pipeline.sessions import SessionCache
from ttftscope.gateway.runtime.workpool import Overloaded, WorkPool
from ttftscope.tokenization import offsets
from ttftscope.tokenization.loader import Tokenizer

LONG = 20_000  # characters: a cold prompt this long is encoded on the work pool
MODEL = "tiny-llama"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _settings(srv: FaultServer, folder: Path, **kw: Any) -> GatewaySettings:
    up = UpstreamSettings(base_url=srv.base_url("normal"), model_dir=folder, models=(MODEL,))
    return GatewaySettings.model_validate({"upstreams": {"ids": up}, **kw})


def _long_text(seed: int) -> str:
    text = ""
    while len(text) < LONG:
        text += agent_turn(len(text), seed=seed)
    return text


class Gate:
    """Holds every encode of a long text at its start until :meth:`open`, and says when one
    is waiting there (the HF call of a cold encode)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.waiting = threading.Event()
        self.opened = threading.Event()
        self.results: list[bool] = []
        real = offsets.plain

        def plain(tk: Any, text: str) -> Any:
            if len(text) >= LONG:
                self.waiting.set()
                self.results.append(self.opened.wait(timeout=30))
            return real(tk, text)

        # the call the encoder makes to encode a whole cold prompt (windows: tokenization.cuts)
        monkeypatch.setattr("ttftscope.tokenization.incremental.plain", plain)

    def open(self) -> None:
        self.opened.set()


def test_the_event_loop_runs_while_a_cold_prompt_is_encoded(
    qwen2: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch)
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    prompt = _long_text(1)

    async def heartbeat() -> None:
        gate.open()  # runs only if the loop is free while the encode waits at its start

    async def main() -> list[int]:
        encode = asyncio.create_task(cache.encode(prompt))
        beat = asyncio.create_task(heartbeat())
        ids = await encode
        await beat
        return ids.ids

    ids = asyncio.run(main())
    # the encode waited for the heartbeat, which ran while the encode was under way
    assert gate.results == [True]
    assert ids == qwen2.encode(prompt)


def test_a_full_pool_refuses_at_once_and_the_cache_stays_as_it_was(
    qwen2: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch)
    cache = SessionCache(qwen2, max_bytes=64 << 20, pool=WorkPool(workers=1, queue=0))

    async def main() -> Overloaded:
        first = asyncio.create_task(cache.encode(_long_text(1)))
        while not gate.waiting.is_set():  # the only worker is busy with the first prompt
            await asyncio.sleep(0.01)
        try:
            await cache.encode(_long_text(2))
        except Overloaded as exc:
            refused = exc
        else:
            raise AssertionError("a second cold prompt was admitted to a full pool")
        entries = cache.entries
        gate.open()
        await first
        assert entries == 1  # the refused prompt left nothing behind
        await cache.encode("a short prompt")  # short prompts are encoded inline, never refused
        return refused

    refused = asyncio.run(main())
    assert refused.retry_after_s >= 1 and "gateway.encode_queue" in str(refused)


def _post_later(gw: GatewayServer, path: str, body: dict[str, Any]) -> Future[httpx.Response]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(httpx.post, gw.base_url + path, json=body, timeout=60)
    pool.shutdown(wait=False)
    return future


def test_a_full_encode_queue_answers_503_with_retry_after_in_each_api_format(
    upstream: FaultServer, qwen2_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch)
    settings = _settings(upstream, qwen2_dir, encode_workers=1, encode_queue=0)
    with GatewayServer(settings) as gw:
        chat = {"model": MODEL, "messages": [{"role": "user", "content": _long_text(1)}]}
        first = _post_later(gw, "/chat/completions", chat)
        assert gate.waiting.wait(timeout=60)
        try:
            chat2 = {"model": MODEL, "messages": [{"role": "user", "content": _long_text(2)}]}
            openai = httpx.post(gw.base_url + "/chat/completions", json=chat2, timeout=60)
            claude = {**chat2, "max_tokens": 4}
            anthropic = httpx.post(gw.base_url + "/messages", json=claude, timeout=60)
        finally:
            gate.open()
        assert first.result().status_code == 200
        metrics = httpx.get(gw.base_url.removesuffix("/v1") + "/metrics", timeout=30).text
    assert "ttftscope_gateway_encode_refused_total 2.0" in metrics
    assert openai.status_code == 503 and int(openai.headers["retry-after"]) >= 1
    assert openai.json()["error"]["code"] == 503
    assert "gateway.encode_queue" in openai.json()["error"]["message"]
    assert anthropic.status_code == 503 and int(anthropic.headers["retry-after"]) >= 1
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "overloaded_error"


def test_more_messages_than_the_bound_is_a_400_in_the_apis_format(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    messages = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    with GatewayServer(_settings(upstream, qwen2_dir, max_messages=3)) as gw:
        chat = httpx.post(
            gw.base_url + "/chat/completions",
            json={"model": MODEL, "messages": messages},
            timeout=30,
        )
        claude = httpx.post(
            gw.base_url + "/messages",
            json={"model": MODEL, "messages": messages, "max_tokens": 4},
            timeout=30,
        )
        within = httpx.post(
            gw.base_url + "/chat/completions",
            json={"model": MODEL, "messages": messages[:3]},
            timeout=30,
        )
    assert chat.status_code == 400 and "gateway.max_messages" in chat.json()["error"]["message"]
    assert claude.status_code == 400
    assert claude.json()["error"]["type"] == "invalid_request_error"
    assert "at most 3" in claude.json()["error"]["message"]
    assert within.status_code == 200


def test_a_prompt_longer_than_max_model_len_is_refused_as_vllm_does(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    with GatewayServer(_settings(upstream, qwen2_dir)) as gw:
        up = gw.gateway.upstreams[0]
        assert up.cache is not None
        up.max_model_len[MODEL] = 64  # as /v1/models says for a served model

        def chat(text: str) -> httpx.Response:
            body = {"model": MODEL, "messages": [{"role": "user", "content": text}]}
            return httpx.post(gw.base_url + "/chat/completions", json=body, timeout=30)

        over = chat("word " * 100)  # ~100 tokens: encoded, then refused
        entries = up.cache.entries
        huge = chat("x" * 64 * up.token_chars * 2)  # refused from its length alone
        assert up.cache.entries == entries  # never encoded
        fits = chat("hello there")
        counted_only = httpx.post(  # counting is how a client learns that it must compact
            gw.base_url + "/messages/count_tokens",
            json={"model": MODEL, "messages": [{"role": "user", "content": "word " * 100}]},
            timeout=30,
        )
    for answer in (over, huge):
        assert answer.status_code == 400
        message = answer.json()["error"]["message"]
        assert message.startswith("This model's maximum context length is 64 tokens.")
    counted = re.search(r"your request has (\d+) input tokens", over.json()["error"]["message"])
    assert counted is not None and int(counted.group(1)) > 100
    assert "more than 64" in huge.json()["error"]["message"]
    assert fits.status_code == 200
    assert counted_only.status_code == 200 and counted_only.json()["input_tokens"] > 100


def test_upstreams_of_one_model_folder_share_one_tokenizer(
    upstream: FaultServer, qwen2_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "qwen2-copy"
    shutil.copytree(qwen2_dir, other)
    ups = {
        name: UpstreamSettings(base_url=upstream.base_url("normal"), model_dir=folder, models=(m,))
        for name, folder, m in (("a", qwen2_dir, "m1"), ("b", qwen2_dir, "m2"), ("c", other, "m3"))
    }
    with GatewayServer(GatewaySettings(upstreams=ups)) as gw:
        a, b, c = gw.gateway.upstreams
        assert a.tok is not None and a.tok is b.tok
        assert c.tok is not None and c.tok is not a.tok
        assert a.cache is not b.cache  # each upstream keeps its own conversations


def _stored_bytes(cache: SessionCache) -> int:
    """Bytes of what the cache keeps for its one conversation, from the objects themselves."""
    (entry,) = cache._entries.values()
    enc = entry.encoder
    held: list[Any] = [enc._ids, enc.utf8, *entry.json.blocks, entry.json.blocks]
    if entry.prompt is not enc.utf8:
        held.append(entry.prompt)
    ends = enc._ends.buffer_info()[1] * enc._ends.itemsize
    return sum(map(sys.getsizeof, held)) + ends


def test_a_cached_conversation_costs_under_2_mb_per_100k_tokens(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=1 << 30)
    prompt = ""
    seed = 0
    while len(prompt) < 120_000:  # agent text: code, prose, a few emoji (4 bytes a char in str)
        prompt += agent_turn(seed, seed=3)
        seed += 1
    assert max(map(ord, prompt)) > 0xFFFF

    async def turns() -> int:
        await cache.encode(prompt)
        return len((await cache.encode(prompt + agent_turn(999, seed=3))).ids)

    tokens = asyncio.run(turns())
    stored = _stored_bytes(cache)
    assert stored / tokens * 100_000 <= 2 << 20
    assert cache.stats.nbytes >= stored * 0.95  # the bound on the cache counts all of it


def test_background_work_takes_one_slot_on_the_pool_and_is_skipped_while_it_is_taken() -> None:
    pool = WorkPool(workers=2, queue=0)
    release = threading.Event()
    try:
        first = pool.background(lambda: (release.wait(30), threading.current_thread().name))
        assert first is not None
        assert pool.background(lambda: "second") is None  # the slot is taken: skipped
        assert pool.pending == 0  # foreground admission does not count it
        release.set()
        ok, thread = first.result(timeout=30)
        assert ok and thread.startswith("ttftscope-encode")  # one of the pool's own threads
        done = threading.Event()
        first.add_done_callback(lambda _: done.set())  # runs after the slot was freed
        assert done.wait(30)
        again = pool.background(lambda: "again")
        assert again is not None and again.result(timeout=30) == "again"
    finally:
        release.set()
        pool.close()
    assert pool.background(lambda: "closed") is None


def test_the_session_caches_shadow_checks_run_on_its_work_pool(
    qwen2: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    real = offsets.encode_ids

    def encode_ids(tk: Any, text: str, *, special: bool) -> list[int]:
        threads.append(threading.current_thread().name)
        return real(tk, text, special=special)

    # the full encode a shadow check compares with (the encoder's own paths use plain/convert)
    monkeypatch.setattr("ttftscope.tokenization.incremental.encode_ids", encode_ids)
    pool = WorkPool(workers=1, queue=4)
    cache = SessionCache(qwen2, max_bytes=64 << 20, shadow_every=1, pool=pool)
    prompt = _long_text(3)

    async def turns() -> None:
        await cache.encode(prompt, "s")
        # a long turn: queued on the one worker behind the first check, it harvests it
        await cache.encode(prompt + _long_text(4)[:8000], "s")

    try:
        asyncio.run(turns())
    finally:
        pool.close()
    assert threads and all(name.startswith("ttftscope-encode") for name in threads)
    assert cache.stats.shadow_checks >= 1 and cache.stats.shadow_mismatches == 0
