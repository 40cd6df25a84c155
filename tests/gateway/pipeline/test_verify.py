"""Verification against an upstream's own tokenization, with a stand-in that serves ``/tokenize``
as vLLM does (its template variables from ``chat_template_kwargs`` only) and answers vLLM's 403
on ``/v1/chat/completions/render`` (a server started without ``--enable-scale-out``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.faultserver import CapturedRequest, FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.reference import reference_ids
from tests.gatewaymetrics import gateway_metric
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

MODEL = "tiny-llama"
CHAT = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "fix the bug"}]
# a template that reads enable_thinking, as Qwen3's does: "none" closes an empty think block
THINKING = (
    "{%- if enable_thinking is defined and not enable_thinking %}"
    "<think>\n\n</think>\n\n{%- endif %}"
)


@pytest.fixture(scope="module")
def thinking_dir(qwen2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen2's tokenizer with a chat template that reads ``enable_thinking``."""
    folder = tmp_path_factory.mktemp("thinking")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(qwen2_dir / name, folder / name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] += THINKING
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def _as_vllm_reads(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vLLM's rewrite of system and developer messages for a template that never names
    "developer" (the start-up check renders one): every such message becomes one system
    message first, their texts joined by a blank line; no other rewrite touches these bodies.
    """
    systems = [m["content"] for m in messages if m["role"] in ("system", "developer")]
    rest = [m for m in messages if m["role"] not in ("system", "developer")]
    if len(systems) < 2 and all(m["role"] != "developer" for m in messages):
        return messages
    return [{"role": "system", "content": "\n\n".join(systems)}, *rest]


@pytest.fixture
def upstream(thinking_dir: Path) -> Iterator[FaultServer]:
    async def capture(request: Request) -> Any:
        raw = await request.body()
        srv.requests.append(CapturedRequest("POST", request.url.path, dict(request.headers), raw))
        return json.loads(raw)

    async def tokenize(request: Request) -> JSONResponse:
        body = await capture(request)
        kwargs = body.get("chat_template_kwargs") or {}
        agp = body.get("add_generation_prompt", True)
        kwargs = {**kwargs, "add_generation_prompt": agp}
        tokens = reference_ids(thinking_dir, _as_vllm_reads(body["messages"]), **kwargs)
        return JSONResponse({"count": len(tokens), "max_model_len": 4096, "tokens": tokens})

    async def render(request: Request) -> JSONResponse:
        await capture(request)
        error = {"message": "Scale-out endpoints are disabled.", "code": 403}
        return JSONResponse({"error": error}, status_code=403)

    routes = [
        Route("/{scenario}/tokenize", tokenize, methods=["POST"]),
        Route("/{scenario}/v1/chat/completions/render", render, methods=["POST"]),
    ]
    with FaultServer(routes=routes) as srv:
        yield srv


def _settings(srv: FaultServer, model_dir: Path, **kw: Any) -> GatewaySettings:
    up = UpstreamSettings(base_url=srv.base_url("normal"), model_dir=model_dir, models=(MODEL,))
    return GatewaySettings(upstreams={"ids": up}, **kw)


def _post(gw: GatewayServer, path: str, body: Any) -> httpx.Response:
    return httpx.post(gw.base_url + path, content=json.dumps(body).encode(), timeout=30)


def _checked(gw: GatewayServer) -> tuple[float, float]:
    checks = gateway_metric(gw.port, "ttftscope_gateway_verify_checks_total", upstream="ids")
    wrong = gateway_metric(gw.port, "ttftscope_gateway_verify_mismatches_total", upstream="ids")
    return checks, wrong


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"model": MODEL, "messages": CHAT, "reasoning_effort": "none"}),
        (
            "/messages",
            {
                "model": MODEL,
                "max_tokens": 8,
                "system": "Be terse.",
                "messages": [{"role": "user", "content": "fix the bug"}],
                "thinking": {"type": "disabled"},
            },
        ),
    ],
    ids=["chat", "messages"],
)
def test_no_effort_is_checked_with_the_template_variables_the_gateway_used(
    upstream: FaultServer, thinking_dir: Path, path: str, body: dict[str, Any]
) -> None:
    # written by hand: thinking off is the closed think block after the generation prompt
    want = reference_ids(thinking_dir, CHAT, enable_thinking=False)
    assert want != reference_ids(thinking_dir, CHAT)
    with GatewayServer(_settings(upstream, thinking_dir, verify_first=1)) as gw:
        resp = _post(gw, path, body)
        assert resp.status_code == 200, resp.text
        sent = upstream.last_request.json()
        assert sent["kv_transfer_params"] == {"prompt_token_ids": want}
        assert _checked(gw) == (1, 0)


def test_a_render_route_the_server_does_not_serve_is_asked_once(
    upstream: FaultServer, thinking_dir: Path
) -> None:
    body = {"model": MODEL, "messages": CHAT}
    with GatewayServer(_settings(upstream, thinking_dir, verify_first=3)) as gw:
        at_start = len(upstream.requests)  # the start-up check asked its corpus already
        for _ in range(3):
            assert _post(gw, "/chat/completions", body).status_code == 200
        asked = [r.path for r in upstream.requests]
        # once in all: the start-up check's 403 is remembered for the verifier too
        assert asked.count("/normal/v1/chat/completions/render") == 1
        assert asked[at_start:].count("/normal/tokenize") == 3
        assert _checked(gw) == (3, 0)
