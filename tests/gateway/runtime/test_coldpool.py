"""Long encodes in worker processes: exact ids, a state the gateway keeps using, a worker
that dies costs one request a slower path (never a wrong id), and no worker outlives the
gateway however it ends."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.reference import reference_ids
from ttftscope.agenttext import agent_turn, build_context
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.errors import ConfigError
from ttftscope.gateway.pipeline.sessions import COLD_BYTES, Encoded, SessionCache
from ttftscope.gateway.runtime.coldpool import ColdPool
from ttftscope.gateway.runtime.workpool import WorkPool
from ttftscope.tokenization.loader import Tokenizer

BOUND_S = 60.0  # how long a test waits for a process to start or end


@pytest.fixture
def cold() -> Iterator[ColdPool]:
    pool = ColdPool(processes=1)
    yield pool
    pool.close(wait=True)  # its workers are gone before the next test counts its own


def _prompt(tok: Tokenizer, seed: int, tokens: int = 20_000) -> str:
    """An agent prompt long enough for a worker process (over COLD_BYTES)."""
    text = "<|im_start|>system\n" + build_context(tokens, lambda s: len(tok.encode(s)), seed=seed)
    assert len(text.encode()) > COLD_BYTES
    return text + f"<|im_start|>user\n{agent_turn(1, seed=seed)}<|im_end|>\n"


def _exact(got: Encoded, tok: Tokenizer, prompt: str) -> bool:
    return got.ids == tok.encode(prompt) and got.ids_json == orjson.dumps(got.ids)


def test_a_cold_prompt_is_encoded_in_a_worker_and_its_state_kept(
    qwen2: Tokenizer, cold: ColdPool
) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20, cold=cold)
    prompt = _prompt(qwen2, 1)
    first = asyncio.run(cache.encode(prompt))
    assert _exact(first, qwen2, prompt) and first.path == "full"
    assert cold.completed == 1 and len(cold.pids) == 1
    # the next turn appends to the state the worker reached, here, reusing its tokens
    turn = prompt + "<|im_start|>assistant\nDone.<|im_end|>\n"
    again = asyncio.run(cache.encode(turn))
    assert _exact(again, qwen2, turn) and again.path == "append"
    assert again.reused_tokens > 0.9 * len(first.ids) and cold.completed == 1


def test_a_long_new_tail_after_a_shared_prefix_goes_to_a_worker_from_the_fork(
    qwen2: Tokenizer, cold: ColdPool
) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20, cold=cold)
    system = _prompt(qwen2, 2)
    asyncio.run(cache.encode(system + "<|im_start|>user\nhi<|im_end|>\n"))
    other = system + _prompt(qwen2, 3, tokens=40_000)  # a longer history of its own
    got = asyncio.run(cache.encode(other))
    assert _exact(got, qwen2, other) and cold.completed == 2
    assert got.reused_tokens > 0 and cache.stats.forks == 1


def test_a_worker_killed_with_a_job_costs_that_job_a_thread_and_the_next_a_new_worker(
    qwen2: Tokenizer, cold: ColdPool, caplog: pytest.LogCaptureFixture
) -> None:
    pool = WorkPool(workers=1, queue=4)
    cache = SessionCache(qwen2, max_bytes=64 << 20, pool=pool, cold=cold)
    asyncio.run(cache.encode(_prompt(qwen2, 4)))  # the worker is up
    (worker,) = cold.pids
    big = _prompt(qwen2, 5, tokens=100_000)  # seconds of work: killed long before it ends

    async def killed_mid_job() -> Encoded:
        job = asyncio.create_task(cache.encode(big))
        deadline = time.monotonic() + BOUND_S
        while cold.submitted < 2 and not job.done():
            assert time.monotonic() < deadline, "the long prompt never reached the worker"
            await asyncio.sleep(0.001)
        os.kill(worker, signal.SIGKILL)
        return await job

    got = asyncio.run(killed_mid_job())
    assert _exact(got, qwen2, big) and cache.stats.cold_failures == 1
    assert "encode worker process died" in caplog.text
    after = _prompt(qwen2, 6)
    assert _exact(asyncio.run(cache.encode(after)), qwen2, after)
    assert cold.started == 2 and cold.completed == 2


_ORPHAN = """
import sys, time
from ttftscope.gateway.runtime.coldpool import ColdPool
from ttftscope.tokenization.loader import load_tokenizer
pool = ColdPool(processes=2)
key = pool.register(load_tokenizer(sys.argv[1]).hf)
futures = [pool.submit(key, None, "hello world") for _ in range(8)]
print(*[f.result().state.text.decode() for f in futures[:1]], flush=True)
deadline = time.monotonic() + 60
while len(pool.pids) < 2 and time.monotonic() < deadline:  # both workers up
    time.sleep(0.01)
print(*pool.pids, flush=True)
time.sleep(3600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_a_gateway_that_is_killed(qwen2: Tokenizer) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, str(qwen2.path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")},
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "hello world"
            pids = [int(p) for p in proc.stdout.readline().split()]
            assert len(pids) == 2 and all(_alive(p) for p in pids)
        finally:
            proc.kill()  # as the OOM killer or kill -9 would: no shutdown code runs
    deadline = time.monotonic() + BOUND_S
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)]


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: its parent, the init process, reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_gateway_with_encode_processes_sends_a_cold_prompts_exact_ids(
    qwen2: Tokenizer, qwen2_dir: Path
) -> None:
    """Through the whole id path (render, encode in the worker, adopt, splice into the
    body), against transformers' rendering and a full encode."""
    with FaultServer() as upstream:
        up = UpstreamSettings(
            base_url=upstream.base_url("normal"), model_dir=qwen2_dir, models=("tiny-qwen-chat",)
        )
        settings = GatewaySettings.model_validate({"upstreams": {"u": up}, "encode_processes": 1})
        with GatewayServer(settings) as gw:
            cold = gw.gateway.cold
            assert cold is not None
            metrics = gw.base_url.removesuffix("/v1") + "/metrics"
            deadline = time.monotonic() + BOUND_S
            while "encode_processes 1.0" not in httpx.get(metrics).text:
                assert time.monotonic() < deadline, "the encode worker never became ready"
                time.sleep(0.05)
            text = _prompt(qwen2, 8)
            chat = {"model": "tiny-qwen-chat", "messages": [{"role": "user", "content": text}]}
            answer = httpx.post(gw.base_url + "/chat/completions", json=chat, timeout=BOUND_S)
            sent = upstream.last_request.json()
            assert cold.completed == 1  # the prompt was encoded in the worker
    assert answer.status_code == 200, answer.text
    expected = reference_ids(qwen2_dir, [{"role": "user", "content": text}])
    assert sent["kv_transfer_params"]["prompt_token_ids"] == expected


def test_a_long_append_to_a_longer_conversation_stays_on_a_thread(
    qwen2: Tokenizer, cold: ColdPool
) -> None:
    """Its state would cross twice whole; a thread splices only the new part."""
    cache = SessionCache(qwen2, max_bytes=64 << 20, cold=cold)
    prompt = _prompt(qwen2, 11, tokens=40_000)
    asyncio.run(cache.encode(prompt))
    longer = prompt + _prompt(qwen2, 12)  # 32 KB and more, but less than what is cached
    got = asyncio.run(cache.encode(longer))
    assert _exact(got, qwen2, longer) and got.path == "append" and cold.completed == 1


def test_a_state_its_shadow_check_disowned_is_never_sent_to_a_worker(
    qwen2: Tokenizer, cold: ColdPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shadow check of a conversation's last turn found a difference (here: a check
    made to disagree) and has finished, not yet counted, when a long next turn arrives: the
    worker starts from nothing, not from that state."""
    pool = WorkPool(workers=1, queue=4)
    cache = SessionCache(qwen2, max_bytes=64 << 20, pool=pool, cold=cold, shadow_every=1)
    lying = lambda tk, text, special: [*tk.encode(text).ids, 0]  # noqa: E731
    monkeypatch.setattr("ttftscope.tokenization.incremental.encode_ids", lying)
    first = _prompt(qwen2, 13)
    asyncio.run(cache.encode(first))
    deadline = time.monotonic() + BOUND_S
    while pool.background(lambda: None) is None:  # the check is done once its slot is free
        assert time.monotonic() < deadline, "the shadow check never finished"
        time.sleep(0.01)
    longer = first + _prompt(qwen2, 14, tokens=40_000)  # appended in place: no fork
    got = asyncio.run(cache.encode(longer))
    assert _exact(got, qwen2, longer) and cache.stats.shadow_mismatches == 1
    assert got.path == "full" and got.reused_tokens == 0 and cold.completed == 2


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policy")
def test_workers_are_scheduled_only_when_nothing_else_wants_the_cpu(cold: ColdPool) -> None:
    cold.start()
    deadline = time.monotonic() + BOUND_S
    while not cold.pids and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cold.pids, "the worker did not load its tokenizer"
    assert [os.sched_getscheduler(pid) for pid in cold.pids] == [os.SCHED_IDLE]
    # and the gateway's own process keeps its normal policy
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_tokenizer_the_workers_cannot_be_given_fails_the_start_only_when_asked_for(
    qwen2: Tokenizer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Their copy of the tokenizer cannot be written (here: a file where its folder goes):
    ``encode_processes = N`` stops the start with what to do; "auto" encodes on threads."""
    (tmp_path / "tokenizers").write_text("not a folder")
    monkeypatch.setenv("TTFTSCOPE_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="encode workers' copy"):
        ColdPool(processes=1).register(qwen2.hf)
    auto = ColdPool(processes=1, required=False)
    with caplog.at_level(logging.WARNING, logger="ttftscope.gateway"):
        assert auto.register(qwen2.hf) == "" and auto.registered == 0
    assert "encoded on threads instead" in caplog.text
    cache = SessionCache(qwen2, max_bytes=64 << 20, cold=auto)
    prompt = _prompt(qwen2, 7)
    got = asyncio.run(cache.encode(prompt))
    assert _exact(got, qwen2, prompt) and auto.submitted == 0 and auto.started == 0
