"""The request log: bodies as received plus where they went, only when prompts may be kept."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

CHAT = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _settings(srv: FaultServer, qwen2_dir: Path, **kw: Any) -> GatewaySettings:
    ups = {
        "text": UpstreamSettings(
            base_url=srv.base_url("normal"), mode="text", models=("tiny-qwen-chat",)
        ),
        "ids": UpstreamSettings(
            base_url=srv.base_url("normal"), model_dir=qwen2_dir, models=("tiny-llama",)
        ),
    }
    return GatewaySettings(upstreams=ups, api_keys_env="GW_KEYS", **kw)


def _chat(gw: GatewayServer, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": "Bearer sekrit-key"}
    route = "/chat/completions" if "messages" in body else "/completions"
    return httpx.post(gw.base_url + route, json=body, headers=headers, timeout=30)


def test_each_body_is_one_line_with_model_and_upstream(
    upstream: FaultServer, qwen2_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "logs" / "requests.jsonl"
    bodies: list[dict[str, Any]] = [
        {"model": "tiny-llama", "messages": CHAT, "stream": True, "max_tokens": 3},
        {"model": "tiny-qwen-chat", "messages": [*CHAT, {"role": "user", "content": "é\n"}]},
        {"model": "tiny-llama", "prompt": "a completions prompt", "max_tokens": 2},
    ]
    settings = _settings(upstream, qwen2_dir, log_prompts=True, request_log=path)
    with GatewayServer(settings, env={"GW_KEYS": "sekrit-key"}) as gw:
        for body in bodies:
            assert _chat(gw, body).status_code == 200
        assert _chat(gw, {"model": "nope", "messages": CHAT}).status_code == 404
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3
    for line, body, name in zip(lines, bodies, ("ids", "text", "ids"), strict=True):
        record = json.loads(line)
        meta = record.pop("ttftscope")
        assert record == body
        assert meta["model"] == body["model"] and meta["upstream"] == name
        assert isinstance(meta["t_wall"], float)
    assert b"sekrit" not in path.read_bytes()


def test_nothing_is_written_without_log_prompts(
    upstream: FaultServer, qwen2_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "requests.jsonl"
    settings = _settings(upstream, qwen2_dir, request_log=path)
    with (
        caplog.at_level(logging.INFO, logger="ttftscope.gateway"),
        GatewayServer(settings, env={"GW_KEYS": "sekrit-key"}) as gw,
    ):
        assert _chat(gw, {"model": "tiny-llama", "messages": CHAT}).status_code == 200
    assert not path.exists()
    assert "prompts are not logged" in caplog.text
