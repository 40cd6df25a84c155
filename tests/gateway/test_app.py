"""The gateway against in-process upstreams: routing, ids, faults, limits, keys, metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.reference import reference_ids
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

CHAT = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _settings(srv: FaultServer, qwen2_dir: Path | None = None, **kw: Any) -> GatewaySettings:
    ups = {
        "text": UpstreamSettings(
            base_url=srv.base_url("normal"), mode="text", models=("tiny-qwen-chat",)
        )
    }
    if qwen2_dir is not None:
        ups["ids"] = UpstreamSettings(
            base_url=srv.base_url("normal"), model_dir=qwen2_dir, models=("tiny-llama",)
        )
    return GatewaySettings(upstreams=ups, **kw)


def _one_ids_upstream(srv: FaultServer, qwen2_dir: Path, **kw: Any) -> GatewaySettings:
    """One ids upstream named "ids" serving tiny-llama, with ``kw`` on its settings."""
    up = UpstreamSettings(
        base_url=srv.base_url("normal"), model_dir=qwen2_dir, models=("tiny-llama",), **kw
    )
    return GatewaySettings(upstreams={"ids": up})


def _post(gw: GatewayServer, path: str, body: Any, **kw: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(gw.base_url + path, content=content, timeout=30, **kw)


def test_models_are_the_union_and_unknown_models_are_named(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    with GatewayServer(_settings(upstream, qwen2_dir)) as gw:
        listed = httpx.get(gw.base_url + "/models").json()
        assert {m["id"]: m["owned_by"] for m in listed["data"]} == {
            "tiny-qwen-chat": "text",
            "tiny-llama": "ids",
        }
        missing = _post(gw, "/chat/completions", {"model": "nope", "messages": CHAT})
        assert missing.status_code == 404
        assert "tiny-llama" in missing.json()["error"]["message"]


def test_ids_mode_sends_the_exact_ids_with_the_chat_request(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    with GatewayServer(_settings(upstream, qwen2_dir)) as gw:
        assert gw.gateway.upstreams[1].api == "chat-ids"
        for stream in (False, True):
            resp = _post(
                gw, "/chat/completions", {"model": "tiny-llama", "messages": CHAT, "stream": stream}
            )
            assert resp.status_code == 200, resp.text
            sent = upstream.last_request.json()
            want = reference_ids(qwen2_dir, CHAT)
            assert sent["kv_transfer_params"]["prompt_token_ids"] == want
            # vLLM reads roles (not text) of messages that come with ids: text stays home
            assert sent["messages"] == [{**m, "content": ""} for m in CHAT]
        metrics = httpx.get(f"http://127.0.0.1:{gw.port}/metrics").text
    assert 'ttftscope_gateway_requests_total{mode="ids",route="chat"' in metrics
    assert 'ttftscope_gateway_upstream_api{api="chat-ids",upstream="ids"} 1.0' in metrics


def test_text_mode_passes_the_request_through_unchanged(upstream: FaultServer) -> None:
    with GatewayServer(_settings(upstream)) as gw:
        body = {"model": "tiny-qwen-chat", "messages": CHAT, "stream": True}
        resp = _post(gw, "/chat/completions", body)
        assert resp.status_code == 200 and "data: [DONE]" in resp.text
        assert upstream.last_request.json() == body


def test_bad_requests_get_clear_openai_errors_and_the_gateway_keeps_serving(
    upstream: FaultServer,
) -> None:
    with GatewayServer(_settings(upstream, max_body_mb=0.01)) as gw:
        cases = [
            (b"{not json", 400, "not valid JSON"),
            (b"[1, 2]", 400, "JSON object"),
            (json.dumps({"messages": CHAT}).encode(), 400, "'model'"),
            (b'{"model": "tiny-qwen-chat", "x": "' + b"a" * 20000 + b'"}', 413, "larger"),
        ]
        for body, status, words in cases:
            resp = _post(gw, "/chat/completions", body)
            assert resp.status_code == status and words in resp.json()["error"]["message"]
        assert httpx.get(f"http://127.0.0.1:{gw.port}/v1/nothing").status_code == 404
        ok = _post(gw, "/chat/completions", {"model": "tiny-qwen-chat", "messages": CHAT})
        assert ok.status_code == 200


def test_upstream_errors_pass_through_and_a_dead_upstream_is_a_502() -> None:
    with FaultServer() as srv:
        ups = {
            name: UpstreamSettings(base_url=srv.base_url(name), mode="text", models=(model,))
            for name, model in (("rate_limited", "a"), ("server_error", "b"))
        }
        ups["dead"] = UpstreamSettings(base_url="http://127.0.0.1:9/v1", mode="text", models=("c",))
        with GatewayServer(GatewaySettings(upstreams=ups)) as gw:
            limited = _post(gw, "/chat/completions", {"model": "a", "messages": CHAT})
            assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
            assert (
                _post(gw, "/chat/completions", {"model": "b", "messages": CHAT}).status_code == 500
            )
            dead = _post(gw, "/chat/completions", {"model": "c", "messages": CHAT})
            assert dead.status_code == 502 and "unreachable" in dead.json()["error"]["message"]


def test_inbound_keys_are_required_when_configured(upstream: FaultServer) -> None:
    settings = _settings(upstream, api_keys_env="GW_KEYS")
    with GatewayServer(settings, env={"GW_KEYS": "k1, k2"}) as gw:
        body = {"model": "tiny-qwen-chat", "messages": CHAT}
        assert _post(gw, "/chat/completions", body).status_code == 401
        wrong = _post(gw, "/chat/completions", body, headers={"Authorization": "Bearer k3"})
        assert wrong.status_code == 401
        right = _post(gw, "/chat/completions", body, headers={"Authorization": "Bearer k2"})
        assert right.status_code == 200
        # the client's key is for the gateway: it never travels upstream
        assert "authorization" not in upstream.last_request.headers


def test_completions_api_translates_the_answer_to_chat(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    with GatewayServer(_one_ids_upstream(upstream, qwen2_dir, api="completions")) as gw:
        assert gw.gateway.upstreams[0].api == "completions"
        body = {"model": "tiny-llama", "messages": CHAT, "max_tokens": 3}
        full = _post(gw, "/chat/completions", body)
        assert full.status_code == 200, full.text
        assert full.json()["object"] == "chat.completion"
        assert full.json()["choices"][0]["message"]["content"] == "Hello wörld"
        sent = upstream.last_request
        assert sent.path.endswith("/v1/completions")
        assert sent.json()["prompt"] == reference_ids(qwen2_dir, CHAT)
        streamed = _post(gw, "/chat/completions", {**body, "stream": True})
        assert '"object":"chat.completion.chunk"' in streamed.text.replace(" ", "")
        assert streamed.text.rstrip().endswith("data: [DONE]")


def test_plain_chats_can_take_completions_while_tool_chats_keep_chat_ids(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    want = reference_ids(qwen2_dir, CHAT)
    tool = {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}
    with GatewayServer(_one_ids_upstream(upstream, qwen2_dir, plain_chats="completions")) as gw:
        up = gw.gateway.upstreams[0]
        assert up.api == "chat-ids" and up.plain_via_completions
        # max_tokens given: the listing here has no max_model_len to derive chat's default
        body: dict[str, Any] = {"model": "tiny-llama", "messages": CHAT, "max_tokens": 3}
        plain = _post(gw, "/chat/completions", body)
        assert plain.status_code == 200 and plain.json()["object"] == "chat.completion"
        sent = upstream.last_request
        assert sent.path.endswith("/v1/completions") and sent.json()["prompt"] == want
        # tools: no completions equivalent, so the chat itself goes, with its ids
        body["tools"] = [tool]
        assert _post(gw, "/chat/completions", body).status_code == 200
        sent = upstream.last_request
        assert sent.path.endswith("/v1/chat/completions")
        assert "prompt_token_ids" in sent.json()["kv_transfer_params"]
        metrics = httpx.get(f"http://127.0.0.1:{gw.port}/metrics").text
    for api in ("chat-ids", "completions"):
        assert f'ttftscope_gateway_upstream_api{{api="{api}",upstream="ids"}} 1.0' in metrics
    assert "ttftscope_gateway_passthrough_total{" not in metrics


@pytest.mark.parametrize(("api", "first_token_s"), [("chat-ids", 0.4), ("completions", 0.0)])
def test_upstream_first_token_is_the_first_token_event_of_either_api(
    qwen2_dir: Path, api: Literal["chat-ids", "completions"], first_token_s: float
) -> None:
    """Chat streams open with a role chunk, completions streams with a token: the metric
    takes the event with the first token in both (the rest of each stream is 0.4 s apart).

    No wall-time threshold: the upstream sends its next event 0.4 s after the first token, so
    a metric that took a later event would exceed the time the client itself measured to the
    first token (which starts before the gateway's clock and ends after it)."""
    slow = FaultOptions(first_content_delay_s=0.4, chunk_delay_s=0.4)
    with FaultServer(slow) as srv, GatewayServer(_one_ids_upstream(srv, qwen2_dir, api=api)) as gw:
        body = {"model": "tiny-llama", "messages": CHAT, "max_tokens": 3, "stream": True}
        client_first_token_s = _first_content_s(gw, body)
        metrics = httpx.get(f"http://127.0.0.1:{gw.port}/metrics").text
    name = "ttftscope_gateway_upstream_first_token_seconds_sum"
    seconds = sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name))
    assert first_token_s <= seconds <= client_first_token_s


def _first_content_s(gw: GatewayServer, body: dict[str, Any]) -> float:
    """Seconds from sending ``body`` to the first chunk with content, read to the end."""
    first: float | None = None
    t0 = time.perf_counter()
    with httpx.stream(
        "POST", gw.base_url + "/chat/completions", content=json.dumps(body), timeout=30
    ) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if first is None and line.startswith("data: {"):
                choices = json.loads(line[len("data: ") :]).get("choices") or [{}]
                if choices[0].get("delta", {}).get("content"):
                    first = time.perf_counter() - t0
    assert first is not None, "no content in the stream"
    return first


def test_the_chat_routes_answer_other_methods_with_405(upstream: FaultServer) -> None:
    with GatewayServer(_settings(upstream)) as gw:
        for path in ("/chat/completions", "/completions"):
            resp = httpx.get(gw.base_url + path, timeout=30)
            assert resp.status_code == 405 and "POST" in resp.json()["error"]["message"]
