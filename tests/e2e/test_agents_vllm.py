"""The real agents against the local vLLM, straight and through the token-id gateway, and
their recorded bodies replayed both ways.

``target`` is where the agents and the replays send requests: the local vLLM itself, or
``ttftscope``'s gateway in front of it (with inbound keys, as the agents send them: Claude
Code's ``x-api-key``, Codex's ``Authorization: Bearer``). vLLM's own ``/metrics`` shows the
requests arrived either way. Through the gateway, every replayed turn of both agents has
the ``input_tokens`` and the greedy answer of the same request sent straight to vLLM, went
as ids (no pass-through), and the gateway's check against vLLM's own rendering found no
difference. The random-weight model never ends an answer by itself, so answers end
at an output limit: Claude Code sets one (``CLAUDE_CODE_MAX_OUTPUT_TOKENS``), then takes
the cut answer for an error after its own continuation attempts; Codex sets none, so the
server's default limit applies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agents import (
    AGENTS,
    API_PATH,
    TEST_KEY,
    Agent,
    make_scratch,
    run_claude,
    run_codex,
    standin_session,
)
from tests.gateway.gatewayserver import GatewayServer
from tests.gatewaymetrics import gateway_metric as metric_of
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.metrics.scrape import scrape_metrics

pytestmark = pytest.mark.e2e

# a Codex request without max_output_tokens may generate this many tokens at most
MAX_DEFAULT_OUTPUT = 256
REPLAY_MAX_TOKENS = 8
# recorded headers a replay does not resend: the connection's own, and the redacted key
NOT_REPLAYED = {"host", "content-length", "connection", "accept-encoding", "accept"}
NOT_REPLAYED |= {"authorization", "x-api-key"}


@dataclass(frozen=True)
class Target:
    name: str
    root_url: str  # no /v1: Claude Code's ANTHROPIC_BASE_URL; Codex and replays add /v1
    metrics_url: str  # vLLM's own, whatever is in front of it


@pytest.fixture(scope="module")
def agent_gateway(vllm: LocalServer) -> Iterator[GatewayServer]:
    """The gateway in front of the local vLLM, taking the agents' key."""
    up = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())
    settings = GatewaySettings(upstreams={"local": up}, api_keys_env="AGENT_KEYS", cache_mb=64)
    with GatewayServer(settings, env={"AGENT_KEYS": TEST_KEY}) as gw:
        yield gw


@pytest.fixture(params=["vllm", "gateway"])
def target(request: pytest.FixtureRequest, vllm: LocalServer) -> Target:
    metrics = vllm.root_url + "/metrics"
    if request.param == "gateway":
        gw: GatewayServer = request.getfixturevalue("agent_gateway")
        return Target("gateway", f"http://127.0.0.1:{gw.port}", metrics)
    return Target(request.param, vllm.root_url, metrics)


def gateway_metric(gw: GatewayServer, name: str, **labels: str) -> float:
    """The sum of the gateway's ``name`` samples whose labels include ``labels``."""
    return metric_of(gw.port, name, key=TEST_KEY, **labels)


def vllm_requests(target: Target, handler: str) -> dict[str, float]:
    """vLLM's ``http_requests_total`` for ``handler``, per status class (2xx, 4xx, …)."""
    snap = scrape_metrics(target.metrics_url)
    series = snap.series("http_requests_total", {"handler": handler})
    counts: dict[str, float] = {}
    for labels, value in series.items():
        status = dict(labels).get("status", "?")
        counts[status] = counts.get(status, 0.0) + value
    return counts


def _rose(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v > before.get(k, 0.0)}


def default_output_limit(target: Target, model: str) -> int:
    """How many tokens the server lets a Responses request without a limit generate.

    vLLM states it in ``response.created``; closing the stream then cancels the request.
    """
    body = {"model": model, "input": "hi", "stream": True}
    url = target.root_url + "/v1/responses"
    with httpx.stream("POST", url, json=body, headers=_auth(), timeout=60) as resp:
        for line in resp.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line.removeprefix("data:"))
                if event.get("type") == "response.created":
                    return int(event["response"]["max_output_tokens"])
    pytest.fail(f"no response.created event from {url}")


def _auth() -> dict[str, str]:
    return {"authorization": f"Bearer {TEST_KEY}", "x-api-key": TEST_KEY}


def test_claude_code_gets_answers(target: Target, vllm: LocalServer, tmp_path: Path) -> None:
    before = vllm_requests(target, "/v1/messages")
    run = run_claude(
        make_scratch(tmp_path),
        base_url=target.root_url,
        api_key=TEST_KEY,
        model=vllm.model,
        prompt="Say hello.",
        max_output_tokens=16,
        extra_args=("--output-format", "json"),
    )
    result = json.loads(run.stdout)
    assert run.returncode == 0 or result.get("api_error") == "max_output_tokens", run.describe()
    assert result["modelUsage"][vllm.model]["outputTokens"] > 0, result
    rose = _rose(before, vllm_requests(target, "/v1/messages"))
    assert rose.get("2xx", 0) >= 1 and set(rose) == {"2xx"}, rose


def test_codex_gets_an_answer(target: Target, vllm: LocalServer, tmp_path: Path) -> None:
    limit = default_output_limit(target, vllm.model)
    if limit > MAX_DEFAULT_OUTPUT:
        pytest.fail(
            f"{target.name} lets a request without max_output_tokens generate {limit} tokens; "
            "Codex sends none and the random-weight model never stops, so it would run for "
            "hours. Give vLLM a default: 'max_new_tokens' in the tiny model's "
            "generation_config.json (a fallback only), or --override-generation-config "
            "'{\"max_new_tokens\": 64}' (also caps requests that ask for more)",
            pytrace=False,
        )
    before = vllm_requests(target, "/v1/responses")
    run = run_codex(
        make_scratch(tmp_path),
        base_url=target.root_url + "/v1",
        api_key=TEST_KEY,
        model=vllm.model,
        prompt="Say hello.",
    )
    assert run.returncode == 0 and run.stdout.strip(), run.describe()
    rose = _rose(before, vllm_requests(target, "/v1/responses"))
    assert rose.get("2xx", 0) >= 1 and set(rose) == {"2xx"}, rose


def replay_body(agent: Agent, body: dict[str, Any], model: str) -> dict[str, Any]:
    """The recorded body, answered in one JSON reply, greedily and briefly."""
    limit = "max_tokens" if agent == "claude-code" else "max_output_tokens"
    return body | {"model": model, "stream": False, "temperature": 0, limit: REPLAY_MAX_TOKENS}


@pytest.mark.parametrize("agent", AGENTS)
def test_recorded_bodies_replay(
    agent: Agent, target: Target, vllm: LocalServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    session = standin_session(agent, tmp_path_factory)
    assert session.api_requests(), session.run.describe()
    prompt_tokens = []
    with httpx.Client(base_url=target.root_url, timeout=120) as client:
        for rec in session.api_requests():
            assert isinstance(rec.body, dict)
            headers = {k: v for k, v in rec.headers.items() if k not in NOT_REPLAYED}
            resp = client.post(
                API_PATH[agent],
                params=httpx.QueryParams(rec.query),
                json=replay_body(agent, rec.body, vllm.model),
                headers=headers | _auth(),
            )
            assert resp.status_code == 200, resp.text[:2000]
            prompt_tokens.append(resp.json()["usage"]["input_tokens"])
    assert prompt_tokens[0] > 0
    assert prompt_tokens == sorted(prompt_tokens), prompt_tokens  # each turn adds to the last


@pytest.mark.parametrize("agent", AGENTS)
def test_recorded_turns_through_the_gateway_match_vllm(
    agent: Agent,
    vllm: LocalServer,
    agent_gateway: GatewayServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    session = standin_session(agent, tmp_path_factory)
    route = "messages" if agent == "claude-code" else "responses"
    ids_before = gateway_metric(
        agent_gateway, "ttftscope_gateway_requests_total", route=route, mode="ids"
    )
    passed_before = gateway_metric(agent_gateway, "ttftscope_gateway_passthrough_total")
    roots = (vllm.root_url, f"http://127.0.0.1:{agent_gateway.port}")
    records = session.api_requests()
    for rec in records:
        assert isinstance(rec.body, dict)
        headers = {k: v for k, v in rec.headers.items() if k not in NOT_REPLAYED} | _auth()
        body = replay_body(agent, rec.body, vllm.model)
        direct, via = (
            httpx.post(root + API_PATH[agent], params=httpx.QueryParams(rec.query), json=body,
                       headers=headers, timeout=120)
            for root in roots
        )  # fmt: skip
        assert direct.status_code == via.status_code == 200, via.text[:2000]
        assert via.json()["usage"]["input_tokens"] == direct.json()["usage"]["input_tokens"]
        answer = "content" if agent == "claude-code" else "output"
        assert _texts(via.json()[answer]) == _texts(direct.json()[answer])
    ids = gateway_metric(agent_gateway, "ttftscope_gateway_requests_total", route=route, mode="ids")
    assert ids - ids_before == len(records)  # every turn on the id path
    assert gateway_metric(agent_gateway, "ttftscope_gateway_passthrough_total") == passed_before
    assert gateway_metric(agent_gateway, "ttftscope_gateway_verify_checks_total") > 0
    assert gateway_metric(agent_gateway, "ttftscope_gateway_verify_mismatches_total") == 0


def _texts(blocks: list[dict[str, Any]]) -> list[Any]:
    """What an answer says: its blocks or items without the ids vLLM makes per request."""
    drop = {"id", "call_id"}
    return [
        {k: _texts(v) if k == "content" and isinstance(v, list) else v for k, v in b.items()
         if k not in drop}
        for b in blocks
    ]  # fmt: skip
