"""The token-id gateway in front of the real local vLLM: SDK, exactness, routing, faults."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gatewaymetrics import gateway_metric
from tests.rawclient import post_raw
from ttftscope.agenttext import agent_turn
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.localserver.install import vllm_home
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.vllm_bench import vllm_bench_command
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def gateway(vllm: LocalServer) -> Iterator[GatewayServer]:
    settings = GatewaySettings(
        upstreams={"local": UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())},
        verify_every=1,
        shadow_every=1,
        cache_mb=64,
    )
    with GatewayServer(settings) as gw:
        yield gw


def _metric(gw: GatewayServer, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{gw.port}/metrics").text
    values = [float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    return sum(values)


def test_the_probe_chose_chat_ids(gateway: GatewayServer) -> None:
    assert gateway.gateway.upstreams[0].api == "chat-ids"


def test_openai_sdk_sync_and_async_streaming_and_not(
    gateway: GatewayServer, vllm: LocalServer
) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="unused")
    messages: list[Any] = [{"role": "user", "content": "Say something."}]
    full = client.chat.completions.create(model=vllm.model, messages=messages, max_tokens=5)
    assert isinstance(full, openai.types.chat.ChatCompletion) and full.usage is not None
    chunks = list(
        client.chat.completions.create(
            model=vllm.model,
            messages=messages,
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens

    async def run_async() -> int:
        aclient = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="unused")
        answer = await aclient.chat.completions.create(
            model=vllm.model, messages=messages, max_tokens=3
        )
        stream = await aclient.chat.completions.create(
            model=vllm.model, messages=messages, max_tokens=3, stream=True
        )
        n = len([c async for c in stream])
        await aclient.close()
        assert answer.choices[0].message.role == "assistant"
        return n

    assert asyncio.run(run_async()) >= 2
    models = client.models.list()
    assert vllm.model in [m.id for m in models.data]


def test_multi_turn_matches_vllm_chat_and_its_own_tokenizer(
    gateway: GatewayServer, vllm: LocalServer
) -> None:
    direct = openai.OpenAI(base_url=vllm.base_url, api_key="unused")
    via = openai.OpenAI(base_url=gateway.base_url, api_key="unused")
    checks = _metric(gateway, "ttftscope_gateway_verify_checks_total")
    messages: list[Any] = [{"role": "system", "content": "You write code. " * 50}]
    for turn in range(4):
        messages.append({"role": "user", "content": agent_turn(turn, seed=3, chars=600)})
        a = direct.chat.completions.create(
            model=vllm.model, messages=messages, max_tokens=8, temperature=0
        )
        b = via.chat.completions.create(
            model=vllm.model, messages=messages, max_tokens=8, temperature=0
        )
        assert b.choices[0].message.content == a.choices[0].message.content
        assert a.usage is not None and b.usage is not None
        assert b.usage.prompt_tokens == a.usage.prompt_tokens
        messages.append({"role": "assistant", "content": a.choices[0].message.content or ""})
    # verify_every=1: every turn's ids were compared with vLLM's own tokenization
    assert _metric(gateway, "ttftscope_gateway_verify_checks_total") - checks == 4
    assert _metric(gateway, "ttftscope_gateway_verify_mismatches_total") == 0
    assert _metric(gateway, "ttftscope_gateway_shadow_mismatches_total") == 0
    assert _metric(gateway, "ttftscope_gateway_tokens_reused_total") > 0


def test_a_cold_prompt_encoded_in_a_worker_process_matches_vllm(vllm: LocalServer) -> None:
    """encode_processes: a cold 10K-token conversation is encoded in a worker process, its
    next turn appends to the state adopted from it; vLLM counts the same prompt tokens for
    both as for the text, and its own tokenization of each agrees (verify_every=1)."""
    up = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())
    settings = GatewaySettings(
        upstreams={"local": up}, verify_every=1, cache_mb=64, encode_processes=1
    )
    direct = openai.OpenAI(base_url=vllm.base_url, api_key="unused")
    messages: list[Any] = [
        {"role": "system", "content": "".join(agent_turn(i, seed=9) for i in range(32))},
        {"role": "user", "content": agent_turn(0, seed=10)},
    ]
    assert len(messages[0]["content"]) > 40_000  # past the gateway's 32 KB for a worker
    with GatewayServer(settings) as gw:
        via = openai.OpenAI(base_url=gw.base_url, api_key="unused")
        cold = gw.gateway.cold
        assert cold is not None
        for _ in range(2):
            a = direct.chat.completions.create(model=vllm.model, messages=messages, max_tokens=4)
            b = via.chat.completions.create(model=vllm.model, messages=messages, max_tokens=4)
            assert a.usage is not None and b.usage is not None
            assert b.usage.prompt_tokens == a.usage.prompt_tokens
            messages += [
                {"role": "assistant", "content": a.choices[0].message.content or ""},
                {"role": "user", "content": agent_turn(1, seed=10)},
            ]
        assert cold.completed == 1  # the first turn; the second appended here
        assert _metric(gw, "ttftscope_gateway_verify_mismatches_total") == 0
        assert _metric(gw, "ttftscope_gateway_verify_checks_total") == 2
        assert _metric(gw, "ttftscope_gateway_tokens_reused_total") > 0


def _vllm_requests(vllm: LocalServer, handler: str) -> float:
    """vLLM's own count of answered requests to ``handler`` (its HTTP instrumentator)."""
    text = httpx.get(vllm.base_url.removesuffix("/v1") + "/metrics").text
    pattern = rf'^http_requests_total{{[^}}]*handler="{re.escape(handler)}"[^}}]*}} (\S+)$'
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.M))


def _until(check: Any, timeout_s: float = 5.0) -> bool:
    # vLLM counts a request just after its last byte: the client may be faster
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(check())


def test_plain_chats_via_completions_answer_as_vllm_chat(vllm: LocalServer) -> None:
    """plain_chats = "completions": the chat goes to /v1/completions with its ids, and the
    answer (text, finish, usage; streamed and not) is what vLLM's chat gives."""
    up = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir(), plain_chats="completions")
    direct = openai.OpenAI(base_url=vllm.base_url, api_key="unused")
    messages: list[Any] = [{"role": "system", "content": "You review diffs. " * 40}]
    with GatewayServer(GatewaySettings(upstreams={"local": up}, cache_mb=64)) as gw:
        assert gw.gateway.upstreams[0].plain_via_completions
        via = openai.OpenAI(base_url=gw.base_url, api_key="unused")
        for turn in range(3):
            messages.append({"role": "user", "content": agent_turn(turn, seed=5, chars=500)})
            kw: Any = {"model": vllm.model, "messages": messages, "max_tokens": 8, "temperature": 0}
            a = direct.chat.completions.create(**kw)
            sent = _vllm_requests(vllm, "/v1/completions")
            b = via.chat.completions.create(**kw)
            chunks = list(
                via.chat.completions.create(
                    **kw, stream=True, stream_options={"include_usage": True}
                )
            )
            assert _until(lambda n=sent: _vllm_requests(vllm, "/v1/completions") - n == 2)
            assert a.usage is not None and b.usage is not None and chunks[-1].usage is not None
            assert b.choices[0].message.content == a.choices[0].message.content
            assert b.choices[0].finish_reason == a.choices[0].finish_reason
            assert b.usage.prompt_tokens == a.usage.prompt_tokens == chunks[-1].usage.prompt_tokens
            assert b.usage.completion_tokens == a.usage.completion_tokens
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == a.choices[0].message.content
            messages.append({"role": "assistant", "content": a.choices[0].message.content or ""})


def test_two_upstreams_route_by_model(vllm: LocalServer) -> None:
    with FaultServer() as other:
        settings = GatewaySettings(
            upstreams={
                "local": UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir()),
                "other": UpstreamSettings(base_url=other.base_url("normal"), mode="text"),
            }
        )
        with GatewayServer(settings) as gw:
            listed = {
                m["id"]: m["owned_by"] for m in httpx.get(gw.base_url + "/models").json()["data"]
            }
            assert listed[vllm.model] == "local" and listed["tiny-llama"] == "other"
            for model in (vllm.model, "tiny-llama"):
                body = {
                    "model": model,
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 2,
                }
                resp = httpx.post(gw.base_url + "/chat/completions", json=body, timeout=60)
                assert resp.status_code == 200 and resp.json()["model"] == model
            assert other.last_request.json()["model"] == "tiny-llama"


def test_a_client_that_disconnects_cancels_the_upstream_request(
    gateway: GatewayServer, vllm: LocalServer
) -> None:
    body = {
        "model": vllm.model,
        "messages": [{"role": "user", "content": "go on"}],
        "max_tokens": 4000,
        "ignore_eos": True,
        "stream": True,
    }
    left = gateway_metric(gateway.port, _LEFT, phase="mid_stream")
    before = _vllm_metric(vllm, "vllm:generation_tokens_total")
    with httpx.stream("POST", gateway.base_url + "/chat/completions", json=body, timeout=60) as r:
        for _ in r.iter_raw():
            break  # the first bytes arrived: generation runs; hang up
    seconds = _until_idle(vllm)
    generated = _vllm_metric(vllm, "vllm:generation_tokens_total") - before
    print(f"stream: vLLM idle {seconds:.2f} s after the client left, {generated:.0f} tokens")
    assert generated < 4000  # aborted: with ignore_eos a finished request makes them all
    assert gateway_metric(gateway.port, _LEFT, phase="mid_stream") == left + 1


_LEFT = "ttftscope_gateway_client_disconnects_total"
_LONG = 8000  # tokens (ignore_eos): far more than are made before the client leaves


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/responses"])
def test_a_client_that_leaves_a_whole_answer_aborts_it_in_vllm(
    gateway: GatewayServer, vllm: LocalServer, path: str
) -> None:
    """Not streamed: vLLM sends nothing until the answer is whole, so before this the
    gateway waited for it (or for ``timeout_seconds``) after the client had gone."""
    if path == "/chat/completions":
        body: dict[str, Any] = {"messages": [{"role": "user", "content": "go on"}]}
        body["max_tokens"] = _LONG
    elif path == "/completions":
        body = {"prompt": "Once upon a time", "max_tokens": _LONG}
    else:
        body = {"input": "go on", "max_output_tokens": _LONG, "store": False}
    body |= {"model": vllm.model, "ignore_eos": True, "stream": False}
    left = gateway_metric(gateway.port, _LEFT, phase="before_answer")
    gone = gateway_metric(gateway.port, "ttftscope_gateway_requests_total", status="499")
    before = _vllm_metric(vllm, "vllm:generation_tokens_total")
    with post_raw(gateway.port, "/v1" + path, body, timeout_s=60):
        # this request is generating (a verification request makes one token at most)
        _wait_for(lambda: _vllm_metric(vllm, "vllm:generation_tokens_total") - before >= 16)
    seconds = _until_idle(vllm)
    generated = _vllm_metric(vllm, "vllm:generation_tokens_total") - before
    print(f"{path}: vLLM idle {seconds:.2f} s after the client left, {generated:.0f} tokens")
    assert generated < _LONG  # aborted: with ignore_eos a finished request makes them all
    assert gateway_metric(gateway.port, _LEFT, phase="before_answer") == left + 1
    assert gateway_metric(gateway.port, "ttftscope_gateway_requests_total", status="499") == (
        gone + 1
    )


def _vllm_metric(vllm: LocalServer, name: str) -> float:
    """``name`` summed over its labels on vLLM's ``/metrics``."""
    text = httpx.get(vllm.root_url + "/metrics", timeout=30).text
    return sum(float(m) for m in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def _wait_for(done: Callable[[], bool], within_s: float = 60.0) -> float:
    """Seconds until ``done()`` (checked every 0.1 s); fails after ``within_s``."""
    t0 = time.monotonic()
    while not done():
        assert time.monotonic() - t0 < within_s, f"not within {within_s:g} s"
        time.sleep(0.1)
    return time.monotonic() - t0


def _until_idle(vllm: LocalServer) -> float:
    """Seconds until vLLM runs no request (a generation that went on would take minutes)."""
    return _wait_for(lambda: _vllm_metric(vllm, "vllm:num_requests_running") == 0, 30.0)


def test_64_concurrent_streaming_conversations(gateway: GatewayServer, vllm: LocalServer) -> None:
    async def conversation(i: int, client: openai.AsyncOpenAI) -> int:
        messages: list[Any] = [{"role": "system", "content": f"Agent {i}. " + "context " * 100}]
        done = 0
        for turn in range(2):
            messages.append({"role": "user", "content": agent_turn(turn, seed=i, chars=300)})
            stream = await client.chat.completions.create(
                model=vllm.model, messages=messages, max_tokens=2, stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            messages.append({"role": "assistant", "content": text})
            done += 1
        return done

    async def run() -> list[int]:
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="unused", timeout=300)
        try:
            return await asyncio.gather(*(conversation(i, client) for i in range(64)))
        finally:
            await client.close()

    assert asyncio.run(run()) == [2] * 64  # every turn of every conversation completed
    assert _metric(gateway, "ttftscope_gateway_session_cache_bytes") <= 64 << 20
    assert _metric(gateway, "ttftscope_gateway_requests_total") > 0


def test_vllm_bench_serve_runs_against_the_gateway(
    gateway: GatewayServer, vllm: LocalServer, tmp_path: Path
) -> None:
    args = [
        "--backend",
        "openai-chat",
        "--base-url",
        f"http://127.0.0.1:{gateway.port}",
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        vllm.model,
        "--tokenizer",
        str(model_dir()),
        "--dataset-name",
        "random",
        "--random-input-len",
        "256",
        "--random-output-len",
        "4",
        "--num-prompts",
        "12",
        "--max-concurrency",
        "2",
        "--seed",
        "1",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        vllm_bench_command(vllm_home() / "venv", args),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"Successful requests:\s+12\b", proc.stdout), proc.stdout[-2000:]
    assert re.search(r"Failed requests:\s+0\b", proc.stdout) or "Failed" not in proc.stdout


TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}},
]


def test_agent_turns_with_tools_keep_the_id_path_and_match_vllm(
    gateway: GatewayServer, vllm: LocalServer
) -> None:
    """Tools, tool calls (one with arguments that are not JSON) and tool results, turn by turn."""
    direct = openai.OpenAI(base_url=vllm.base_url, api_key="unused")
    via = openai.OpenAI(base_url=gateway.base_url, api_key="unused")
    passed = _metric(gateway, "ttftscope_gateway_passthrough_total")
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding agent with tools."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    calls = [('{"path": "src/app.py"}', "def f():\n    return 1\n"), ("not json", "3 passed")]
    for i, (arguments, result) in enumerate(calls):
        kw: dict[str, Any] = {
            "model": vllm.model,
            "messages": messages,
            "tools": TOOLS,
            "max_tokens": 6,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": 3,
        }
        a = direct.chat.completions.create(**kw)
        b = via.chat.completions.create(**kw)
        assert a.usage is not None and b.usage is not None
        assert b.usage.prompt_tokens == a.usage.prompt_tokens
        assert b.choices[0].message.content == a.choices[0].message.content
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": arguments},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": result},
        ]
    assert _metric(gateway, "ttftscope_gateway_passthrough_total") == passed  # all went as ids
    assert _metric(gateway, "ttftscope_gateway_verify_mismatches_total") == 0
