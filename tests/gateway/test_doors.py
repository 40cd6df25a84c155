"""Doors the gateway keeps shut: inbound keys that resolve to none, the upstream's key in an
upstream's error, ``/metrics`` without a key."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.errors import ConfigError
from ttftscope.gateway.app import create_app

UPSTREAM_KEY = "sk-upstream-0123456789abcdef"
CHAT = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _settings(srv: FaultServer, scenario: str = "normal", **kw: object) -> GatewaySettings:
    up = UpstreamSettings(
        base_url=srv.base_url(scenario),
        mode="text",
        models=("tiny-qwen-chat",),
        api_key_env="UPSTREAM_KEY",
    )
    return GatewaySettings.model_validate({"upstreams": {"u": up}, **kw})


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "which is not set"),
        ({"GW_KEYS": ""}, "which holds no key"),
        ({"GW_KEYS": " , ,"}, "which holds no key"),
    ],
)
def test_inbound_keys_that_resolve_to_none_stop_the_gateway(
    upstream: FaultServer, env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=f"GW_KEYS, {says}") as info:
        create_app(_settings(upstream, api_keys_env="GW_KEYS"), env=env)
    assert "export GW_KEYS=" in str(info.value)


def test_an_upstream_error_quoting_the_gateways_key_is_masked(upstream: FaultServer) -> None:
    env = {"UPSTREAM_KEY": UPSTREAM_KEY}
    with GatewayServer(_settings(upstream, "unauthorized"), env=env) as gw:
        body = {"model": "tiny-qwen-chat", "messages": CHAT}
        answer = httpx.post(gw.base_url + "/chat/completions", json=body, timeout=30)
    assert upstream.last_request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert answer.status_code == 401
    assert UPSTREAM_KEY not in answer.text and "0123456789" not in answer.text
    assert "Incorrect API key provided: sk-…cdef" in answer.json()["error"]["message"]


def test_metrics_ask_for_the_inbound_key(upstream: FaultServer) -> None:
    env = {"GW_KEYS": "k1", "UPSTREAM_KEY": UPSTREAM_KEY}
    with GatewayServer(_settings(upstream, api_keys_env="GW_KEYS"), env=env) as gw:
        url = gw.base_url.removesuffix("/v1") + "/metrics"
        refused = httpx.get(url, timeout=30)
        assert refused.status_code == 401 and "metrics_public" in refused.text
        assert "ttftscope_gateway" not in refused.text
        for headers in ({"Authorization": "Bearer k1"}, {"x-api-key": "k1"}):
            assert "ttftscope_gateway" in httpx.get(url, headers=headers, timeout=30).text


def test_metrics_public_opens_them_without_a_key(upstream: FaultServer) -> None:
    env = {"GW_KEYS": "k1", "UPSTREAM_KEY": UPSTREAM_KEY}
    settings = _settings(upstream, api_keys_env="GW_KEYS", metrics_public=True)
    with GatewayServer(settings, env=env) as gw:
        url = gw.base_url.removesuffix("/v1") + "/metrics"
        assert "ttftscope_gateway" in httpx.get(url, timeout=30).text


# routes anyone may call: a liveness probe, and the catch-all that answers 404 for what is
# not served (it reveals nothing); every other route of the app's table must ask for a key
PUBLIC = {"/health", "/{path:path}"}


def _every_route() -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, read from its own table."""
    app = create_app(GatewaySettings())
    out = [("POST", path) for path in app.routes]
    for route in app.fallback.routes:
        if route.path in PUBLIC:
            continue
        for method in sorted(route.methods - {"HEAD"}):
            out.append((method, route.path.replace("{response_id}", "resp_123")))
    return out


def test_the_route_table_is_read_whole() -> None:
    paths = {path for _, path in _every_route()}
    assert {"/v1/models", "/metrics", "/v1/messages", "/v1/responses/resp_123/cancel"} <= paths


@pytest.mark.parametrize(("method", "path"), _every_route())
def test_every_route_refuses_a_missing_or_wrong_key(
    upstream: FaultServer, method: str, path: str
) -> None:
    env = {"GW_KEYS": "k1", "UPSTREAM_KEY": UPSTREAM_KEY}
    with GatewayServer(_settings(upstream, api_keys_env="GW_KEYS"), env=env) as gw:
        url = gw.base_url.removesuffix("/v1") + path
        body = {"model": "tiny-qwen-chat", "messages": CHAT, "input": "hi", "max_tokens": 5}
        before = len(upstream.requests)
        for headers in ({}, {"Authorization": "Bearer k2"}, {"x-api-key": "nope"}):
            answer = httpx.request(method, url, json=body, headers=headers, timeout=30)
            assert answer.status_code == 401, (method, path, headers, answer.text[:200])
        assert len(upstream.requests) == before  # nothing reached the upstream
        good = httpx.request(method, url, json=body, headers={"x-api-key": "k1"}, timeout=30)
        assert good.status_code != 401
