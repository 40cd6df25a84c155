"""Doors the gateway keeps shut: inbound keys that resolve to none, the upstream's key in an
upstream's error, ``/metrics`` without a key."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import httpx
import pytest
from starlette.responses import Response

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gatewaymetrics import gateway_metric
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.errors import ConfigError
from ttftscope.gateway.app import create_app
from ttftscope.gateway.routing import Route, RouteTable
from ttftscope.gateway.state import Call
from ttftscope.gateway.transport.apierrors import api_format

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


# who may call what, written out here (not read from the table): a route added to the table
# asks for a key unless this says otherwise
PUBLIC = {"/health"}
METRICS = {"/metrics"}  # keyed unless gateway.metrics_public
BODY = {"model": "tiny-qwen-chat", "messages": CHAT, "input": "hi", "max_tokens": 5}
KEYS = {"GW_KEYS": "k1", "UPSTREAM_KEY": UPSTREAM_KEY}
WRONG: tuple[dict[str, str], ...] = (
    {},
    {"Authorization": "Bearer k2"},
    {"x-api-key": "nope"},
    {"Authorization": "k1"},
)


def _every_route() -> list[tuple[str, Route]]:
    """(method, route) of every entry of the app's one routing table."""
    table = create_app(GatewaySettings()).table
    return [(method, route) for route in table.routes for method in sorted(route.methods)]


def _url(gw: GatewayServer, route: Route) -> str:
    return gw.base_url.removesuffix("/v1") + route.path.replace("{response_id}", "resp_123")


def _refused_in_format(answer: httpx.Response, fmt: str) -> bool:
    """A 401 in the API's own error format (what its clients parse)."""
    body = answer.json()
    if fmt == "anthropic":
        return bool(body["type"] == "error" and body["error"]["type"] == "authentication_error")
    return bool(body["error"]["type"] == "AuthenticationError" and body["error"]["code"] == 401)


def test_the_route_table_is_read_whole_and_its_doors_are_as_written() -> None:
    routes = {route.path: route for _, route in _every_route()}
    assert {"/v1/models", "/metrics", "/v1/messages", "/v1/responses/{response_id}/cancel"} <= set(
        routes
    )
    assert {p for p, r in routes.items() if r.access == "public"} == PUBLIC
    assert {p for p, r in routes.items() if r.access == "metrics"} == METRICS
    # the format a route answers in is the one answers made before routing use (bounds,
    # deadlines, 404, 405), read from its path
    assert {p: r.fmt for p, r in routes.items()} == {p: api_format(p) for p in routes}


@pytest.mark.parametrize(
    ("method", "route"), _every_route(), ids=lambda v: v if isinstance(v, str) else v.path
)
def test_every_route_refuses_a_missing_or_wrong_key(
    upstream: FaultServer, method: str, route: Route
) -> None:
    """Each entry of the table, walked: keyed routes refuse in their API's format and reach
    no upstream; /health is open; /metrics follows gateway.metrics_public."""
    for public in (False, True) if route.path in METRICS else (False,):
        settings = _settings(upstream, api_keys_env="GW_KEYS", metrics_public=public)
        with GatewayServer(settings, env=KEYS) as gw:
            before = len(upstream.requests)
            for headers in WRONG:
                answer = httpx.request(method, _url(gw, route), json=BODY, headers=headers)
                if route.path in PUBLIC or public:
                    assert answer.status_code == 200, (method, route.path, answer.text[:200])
                    continue
                assert answer.status_code == 401, (method, route.path, headers, answer.text)
                assert _refused_in_format(answer, route.fmt), (route.path, answer.text)
            assert len(upstream.requests) == before  # nothing reached the upstream
            good = httpx.request(method, _url(gw, route), json=BODY, headers={"x-api-key": "k1"})
            assert good.status_code != 401


async def _broken(call: Call) -> Response:
    raise RuntimeError("a bug in a handler")


def test_every_route_answers_a_failure_of_its_own_as_a_500_in_its_format(
    upstream: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The one wrapper, not each handler, turns a bug into the API's 500 (and counts it):
    the routes Starlette served before answered a bare text 500."""
    with GatewayServer(_settings(upstream), env=KEYS) as gw:
        app, table = gw.app, gw.app.table
        app.table = RouteTable([dataclasses.replace(r, handler=_broken) for r in table.routes])
        for method, route in _every_route():
            answer = httpx.request(method, _url(gw, route), json=BODY)
            assert answer.status_code == 500, (method, route.path, answer.text)
            error = answer.json()["error"]
            assert error["type"] == ("api_error" if route.fmt == "anthropic" else "APIError")
            assert "its log says why" in error["message"]
        app.table = table  # /metrics answers again
        counted = gateway_metric(gw.port, "ttftscope_gateway_requests_total", status="500")
    labelled = [route for _, route in _every_route() if route.label is not None]
    assert counted == len(labelled)
    logged = [r for r in caplog.records if r.exc_info and "a bug" in str(r.exc_info[1])]
    assert len(logged) == len(_every_route())  # each with its traceback
