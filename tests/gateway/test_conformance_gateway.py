"""The conformance check inside a running gateway: what requests do with its verdicts, its
metrics, and a hostile upstream answering the check while the gateway serves."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.vllmfake import HUGE, MODEL, FakeOptions, FakeVllm, Hostile
from tests.gatewaymetrics import gateway_metric
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.gateway.proving import oracle
from ttftscope.gateway.proving.conformance import StartupChecks, UpstreamCheck

PLAIN = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
}


def _settings(srv: FakeVllm, model_dir: Path, **kw: Any) -> GatewaySettings:
    up = UpstreamSettings(base_url=srv.base_url, model_dir=model_dir)
    return GatewaySettings(upstreams={"u": up}, verify_first=0, **kw)


def _chat(gw: GatewayServer, body: dict[str, Any]) -> httpx.Response:
    data = json.dumps(body).encode()
    return httpx.post(gw.base_url + "/chat/completions", content=data, timeout=30)


def test_an_unproven_class_goes_as_text_named_and_the_rest_as_ids(qwen2_dir: Path) -> None:
    with (
        FakeVllm(FakeOptions(model_dir=qwen2_dir, wrong=frozenset({"tools"}))) as srv,
        GatewayServer(_settings(srv, qwen2_dir)) as gw,
    ):
        assert _chat(gw, PLAIN).status_code == 200
        assert "kv_transfer_params" in srv.seen.generated[-1]
        assert _chat(gw, {**PLAIN, "tools": [TOOL]}).status_code == 200
        assert "kv_transfer_params" not in srv.seen.generated[-1]
        reason = {"upstream": "u", "reason": "unproven_shape"}
        assert gateway_metric(gw.port, "ttftscope_gateway_passthrough_total", **reason) == 1
        shape = {"upstream": "u", "api": "chat"}
        assert gateway_metric(gw.port, "ttftscope_gateway_shape_ids", shape="plain", **shape) == 1
        assert gateway_metric(gw.port, "ttftscope_gateway_shape_ids", shape="tools", **shape) == 0
        version = {"upstream": "u", "version": "0.34.0", "ids": "yes"}
        assert gateway_metric(gw.port, "ttftscope_gateway_upstream_version", **version) == 1


def _wait_for(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(0.01)


def _check(gw: GatewayServer, name: str) -> UpstreamCheck:
    """The start-up (or latest) conformance check of upstream ``name``."""
    prover = gw.gateway.prover
    assert isinstance(prover, StartupChecks)
    return prover.checks[name]


@pytest.mark.parametrize("hostile", ["drip", "huge", "garbage"])
def test_a_hostile_answer_to_the_check_costs_a_bound_never_the_loop(
    qwen2_dir: Path, monkeypatch: pytest.MonkeyPatch, hostile: Hostile
) -> None:
    monkeypatch.setattr(oracle, "CHECK_TIMEOUT_S", 3.0)
    with (
        FakeVllm(FakeOptions(model_dir=qwen2_dir)) as srv,
        GatewayServer(_settings(srv, qwen2_dir, version_poll_seconds=0.05)) as gw,
    ):
        srv.options.hostile = hostile  # the chat render route turns hostile, and says so:
        srv.options.version = "0.34.1"  # the gateway re-checks on its next /version read
        if hostile != "garbage":
            assert srv.seen.sending.wait(60), "the re-check never asked the render route"
            t0 = time.perf_counter()
            resp = _chat(gw, PLAIN)  # served while the hostile answer is being read
            took = time.perf_counter() - t0
            # the bound does not move with load: the hostile answer was still going on
            assert not srv.seen.finished.is_set() or hostile == "huge", took
            assert resp.status_code == 200
        _wait_for(lambda: _check(gw, "u").version == "0.34.1", "re-check")
        assert srv.seen.sent < HUGE  # the gateway hung up long before 100 MB
        plain = _check(gw, "u").table.get("chat", "plain")
        assert plain.ids and plain.oracle == "tokenize", plain  # render abandoned, not fatal
        assert _chat(gw, PLAIN).status_code == 200
        assert "kv_transfer_params" in srv.seen.generated[-1]


def test_a_verified_mismatch_turns_its_shape_class_to_text_and_says_so(qwen2_dir: Path) -> None:
    """Proven at start-up, then the server renders tool requests otherwise (a restart with
    another template, a flag): the verifier's mismatch takes ``tools`` off ids, not ``plain``."""
    options = FakeOptions(model_dir=qwen2_dir)
    with FakeVllm(options) as srv, GatewayServer(_settings(srv, qwen2_dir, verify_every=1)) as gw:
        tools = {**PLAIN, "tools": [TOOL]}
        assert _chat(gw, tools).status_code == 200
        assert "kv_transfer_params" in srv.seen.generated[-1]
        options.wrong = frozenset({"tools"})
        assert _chat(gw, tools).status_code == 200  # the verified one: sent as text
        assert "kv_transfer_params" not in srv.seen.generated[-1]
        asked = len(srv.seen.paths)
        assert _chat(gw, tools).status_code == 200  # the class is text now: not even checked
        assert "kv_transfer_params" not in srv.seen.generated[-1]
        assert srv.seen.paths[asked:] == ["/v1/chat/completions"]
        assert _chat(gw, PLAIN).status_code == 200
        assert "kv_transfer_params" in srv.seen.generated[-1]
        shape = {"upstream": "u", "api": "chat"}
        assert gateway_metric(gw.port, "ttftscope_gateway_shape_ids", shape="tools", **shape) == 0
        assert gateway_metric(gw.port, "ttftscope_gateway_shape_ids", shape="plain", **shape) == 1
        reason = {"upstream": "u", "reason": "unproven_shape"}
        assert gateway_metric(gw.port, "ttftscope_gateway_passthrough_total", **reason) == 1
