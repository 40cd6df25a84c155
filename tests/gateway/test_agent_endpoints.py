"""The agents' own APIs through the gateway, against an in-process upstream: Anthropic
Messages (Claude Code) and count_tokens, keys as Claude Code sends them, errors in each
API's format, session pinning, the start-up check and default verification."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.reference import reference_ids
from tests.gatewaymetrics import gateway_metric
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

MODEL = "tiny-llama"
FIRST = [{"role": "user", "content": [{"type": "text", "text": "fix the bug"}]}]
# long enough that conversations are told apart beyond the session cache's bucket key
SYSTEM = "You are terse. " * 30
ANTHROPIC: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 32,
    "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
    "messages": FIRST,
}
# the same conversation as chat messages, written out by hand
AS_CHAT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "fix the bug"},
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _settings(srv: FaultServer, model_dir: Path, **kw: Any) -> GatewaySettings:
    up = UpstreamSettings(base_url=srv.base_url("normal"), model_dir=model_dir, models=(MODEL,))
    return GatewaySettings(upstreams={"ids": up}, **kw)


def _post(gw: GatewayServer, path: str, body: Any, **kw: Any) -> httpx.Response:
    return httpx.post(gw.base_url + path, content=json.dumps(body).encode(), timeout=30, **kw)


def _metric(gw: GatewayServer, name: str, **labels: str) -> float:
    return gateway_metric(gw.port, name, **labels)


def test_messages_go_upstream_with_exact_ids_streamed_or_not(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    want = reference_ids(qwen2_dir, AS_CHAT)
    with GatewayServer(_settings(upstream, qwen2_dir)) as gw:
        for stream in (False, True):
            resp = _post(gw, "/messages?beta=true", {**ANTHROPIC, "stream": stream})
            assert resp.status_code == 200, resp.text
            sent = upstream.last_request
            assert sent.path == "/normal/v1/messages"
            body = sent.json()
            assert body["kv_transfer_params"] == {"prompt_token_ids": want}
            # the Anthropic body itself goes, as the client wrote it
            assert {k: v for k, v in body.items() if k != "kv_transfer_params"} == {
                **ANTHROPIC,
                "stream": stream,
            }
        assert "content_block_delta" in resp.text
        assert _metric(gw, "ttftscope_gateway_requests_total", mode="ids", route="messages") == 2
        assert _metric(gw, "ttftscope_gateway_upstream_first_token_seconds_count") >= 1


def test_count_tokens_is_answered_by_the_gateway(upstream: FaultServer, qwen2_dir: Path) -> None:
    want = len(reference_ids(qwen2_dir, AS_CHAT))
    body = {k: v for k, v in ANTHROPIC.items() if k != "max_tokens"}
    with GatewayServer(_settings(upstream, qwen2_dir, verify_first=0)) as gw:
        before = len(upstream.requests)
        resp = _post(gw, "/messages/count_tokens", body)
        assert resp.json() == {
            "input_tokens": want,
            "context_management": {"original_input_tokens": want},
        }
        assert len(upstream.requests) == before  # no upstream call
        # what the gateway cannot reproduce is asked of the upstream
        image = {"type": "image", "source": {"type": "base64", "data": "AA=="}}
        odd = {**body, "messages": [{"role": "user", "content": [image]}]}
        assert _post(gw, "/messages/count_tokens", odd).status_code == 200
        assert upstream.last_request.path == "/normal/v1/messages/count_tokens"
        assert _metric(gw, "ttftscope_gateway_passthrough_total", reason="non_text_content") == 1


def test_keys_as_claude_code_sends_them_and_errors_in_anthropic_format(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    env = {"GW_KEYS": "k1,k2"}
    with GatewayServer(_settings(upstream, qwen2_dir, api_keys_env="GW_KEYS"), env=env) as gw:
        refused = _post(gw, "/messages", ANTHROPIC, headers={"x-api-key": "nope"})
        assert refused.status_code == 401
        assert refused.json()["type"] == "error"
        assert refused.json()["error"]["type"] == "authentication_error"
        assert _post(gw, "/messages", ANTHROPIC, headers={"x-api-key": "k2"}).status_code == 200
        bearer = {"authorization": "Bearer k1"}
        assert _post(gw, "/messages", ANTHROPIC, headers=bearer).status_code == 200
        missing = _post(gw, "/messages", {**ANTHROPIC, "model": "nope"}, headers=bearer)
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
        # the client's key never reaches the upstream
        assert "x-api-key" not in upstream.last_request.headers
        get = httpx.get(gw.base_url + "/messages", headers=bearer)
        assert get.status_code == 405 and get.json()["type"] == "error"
        # the chat route still answers in OpenAI's format
        chat = _post(gw, "/chat/completions", {"model": MODEL, "messages": AS_CHAT})
        assert chat.status_code == 401 and "message" in chat.json()["error"]


def test_an_agents_session_header_pins_its_conversation(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    turn2 = {
        **ANTHROPIC,
        "messages": [
            *FIRST,
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
            {"role": "user", "content": "go on"},
        ],
    }
    with GatewayServer(_settings(upstream, qwen2_dir, verify_first=0)) as gw:
        for session in ("a", "b"):  # two conversations with the same history
            for body in (ANTHROPIC, turn2):
                headers = {"x-claude-code-session-id": session}
                assert _post(gw, "/messages", body, headers=headers).status_code == 200
        cache = gw.gateway.upstreams[0].cache
        assert cache is not None
        # one entry per session, each extended in place; b's first request started from a
        # fork of a's state (the same history), never from a itself
        assert cache.entries == 2 and cache.stats.forks == 1


def test_an_upstream_older_than_0_32_is_served_as_text(qwen2_dir: Path) -> None:
    with (
        FaultServer(FaultOptions(version="0.31.2")) as srv,
        GatewayServer(_settings(srv, qwen2_dir)) as gw,
    ):
        assert gw.gateway.upstreams[0].api is None
        assert _post(gw, "/messages", ANTHROPIC).status_code == 200
        assert "kv_transfer_params" not in srv.last_request.json()
        version = {"ids": "no", "upstream": "ids", "version": "0.31.2"}
        assert _metric(gw, "ttftscope_gateway_upstream_version", **version) == 1
        assert _metric(gw, "ttftscope_gateway_requests_total", mode="text", route="messages") == 1


def test_the_first_requests_of_each_api_are_verified_by_default(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    before = len(upstream.requests)
    with GatewayServer(_settings(upstream, qwen2_dir)) as gw:
        for _ in range(4):
            _post(gw, "/messages", ANTHROPIC)
        mine = upstream.requests[before:]
        asked = [r.path for r in mine if r.path.endswith(("/render", "/tokenize"))]
        # the fault server serves neither: each 404 is remembered by the upstream, each route
        # asked once in all (by the start-up check; the verifier then knows)
        assert asked == [
            "/normal/v1/chat/completions/render",
            "/normal/tokenize",
            "/normal/v1/messages/render",
            "/normal/v1/responses/render",
        ]


def test_a_compacted_history_costs_one_encode_never_a_wrong_id(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    long_history = [
        *FIRST,
        {"role": "assistant", "content": [{"type": "text", "text": "Reading. " * 200}]},
        {"role": "user", "content": "and the tests"},
    ]
    compacted = [{"role": "user", "content": "Summary of the work so far: fixed calc.py."}]
    headers = {"x-claude-code-session-id": "s1"}
    with GatewayServer(_settings(upstream, qwen2_dir, verify_first=0)) as gw:
        for messages, as_chat in (
            (long_history, [*AS_CHAT, {"role": "assistant", "content": "Reading. " * 200},
                            {"role": "user", "content": "and the tests"}]),
            (compacted, [AS_CHAT[0], {"role": "user", "content": compacted[0]["content"]}]),
        ):  # fmt: skip
            resp = _post(gw, "/messages", {**ANTHROPIC, "messages": messages}, headers=headers)
            assert resp.status_code == 200
            want = reference_ids(qwen2_dir, as_chat)
            assert upstream.last_request.json()["kv_transfer_params"]["prompt_token_ids"] == want
        # the compacted prompt keeps the system prompt: an edit after it, not a full re-encode
        assert _metric(gw, "ttftscope_gateway_encoder_full_fallbacks_total") == 0


def test_responses_go_upstream_with_exact_ids_and_stateful_ones_as_text(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    body = {
        "model": MODEL,
        "instructions": SYSTEM,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix the bug"}],
            }
        ],
        "store": False,
        "stream": True,
        "prompt_cache_key": "codex-1",
    }
    want = reference_ids(qwen2_dir, AS_CHAT)
    with GatewayServer(_settings(upstream, qwen2_dir, verify_first=0)) as gw:
        resp = _post(gw, "/responses", body)
        assert resp.status_code == 200 and "output_text.delta" in resp.text
        sent = upstream.last_request
        assert sent.path == "/normal/v1/responses"
        assert sent.json()["kv_transfer_params"] == {"prompt_token_ids": want}
        stateful = _post(gw, "/responses", {**body, "previous_response_id": "resp_1"})
        assert stateful.status_code == 200
        assert "kv_transfer_params" not in upstream.last_request.json()
        assert _metric(gw, "ttftscope_gateway_passthrough_total", reason="stateful") == 1
        assert _metric(gw, "ttftscope_gateway_requests_total", route="responses", mode="ids") == 1
