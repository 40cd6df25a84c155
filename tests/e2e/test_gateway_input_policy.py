"""The gateway's input policy against the real vLLM: the same status class as vLLM itself.

A body nested deep in an extra field, ``stream`` values vLLM reads (``"yes"``, ``1``,
``"no"``) or refuses (``"maybe"``, ``2``), and JSON only vLLM's parser reads (a lone surrogate
escape, ``NaN``): sent to vLLM directly and through the gateway (chat as chat-ids, and plain
chats translated to completions), each answer's status class matches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.gatewayserver import GatewayServer
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e

TIMEOUT = httpx.Timeout(300.0)
MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module", params=["chat-ids", "completions"])
def gateway(request: pytest.FixtureRequest, vllm: LocalServer) -> Iterator[GatewayServer]:
    """The gateway in front of vLLM; plain chats as chat-ids, or translated to completions."""
    up = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir(), plain_chats=request.param)
    with GatewayServer(GatewaySettings(upstreams={"local": up}, cache_mb=64)) as gw:
        assert gw.gateway.upstreams[0].api == "chat-ids"
        assert gw.gateway.upstreams[0].plain_via_completions is (request.param == "completions")
        yield gw


def _body(path: str, model: str) -> dict[str, Any]:
    if path == "/chat/completions":
        return {"model": model, "messages": MESSAGES, "max_tokens": 4, "temperature": 0}
    return {"model": model, "prompt": "Say something.", "max_tokens": 4, "temperature": 0}


def _both(base_urls: tuple[str, str], path: str, raw: bytes) -> tuple[httpx.Response, ...]:
    headers = {"content-type": "application/json"}
    return tuple(
        httpx.post(url + path, content=raw, headers=headers, timeout=TIMEOUT) for url in base_urls
    )


@pytest.mark.parametrize("depth", [300, 1000, 1100])
@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
def test_a_deep_body_gets_the_status_class_vllm_gives(
    gateway: GatewayServer, vllm: LocalServer, path: str, depth: int
) -> None:
    """300: both read it (the gateway once gave a 500 here); 1000: past vLLM's parser, within
    the gateway's (vLLM's 400 relayed); 1100: past both."""
    raw = orjson.dumps(_body(path, vllm.model))[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
    direct, through = _both((vllm.base_url, gateway.base_url), path, raw)
    assert through.status_code // 100 == direct.status_code // 100, (direct.text, through.text)
    assert through.status_code != 500


@pytest.mark.parametrize("value", ["yes", 1, "true", "no", 0, "maybe", 2, " true"])
@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
def test_a_stream_value_gets_what_vllm_gives(
    gateway: GatewayServer, vllm: LocalServer, path: str, value: object
) -> None:
    raw = orjson.dumps({**_body(path, vllm.model), "stream": value})
    direct, through = _both((vllm.base_url, gateway.base_url), path, raw)
    assert through.status_code // 100 == direct.status_code // 100, (direct.text, through.text)
    if direct.status_code == 200:  # streamed by both, or by neither
        media = [r.headers["content-type"].split(";")[0] for r in (direct, through)]
        assert media[0] == media[1], media


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"Say something.", b"cut \\udc80 here"),
        (b"Say something.", b"\\ud83d"),
        (b'"temperature":0', b'"temperature":NaN'),
    ],
    ids=["lone_low", "lone_high", "nan"],
)
@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
def test_json_only_vllms_parser_reads_gets_what_vllm_gives(
    gateway: GatewayServer, vllm: LocalServer, path: str, old: bytes, new: bytes
) -> None:
    """The gateway once answered these with its own 400 "not valid JSON"."""
    raw = orjson.dumps(_body(path, vllm.model)).replace(old, new, 1)
    direct, through = _both((vllm.base_url, gateway.base_url), path, raw)
    assert through.status_code == direct.status_code, (direct.text, through.text)
    if direct.status_code != 200:  # vLLM's own error, relayed
        assert through.json()["error"]["message"] == direct.json()["error"]["message"]
