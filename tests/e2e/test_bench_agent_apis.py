"""``ttftscope bench --api messages|responses`` on the real local vLLM.

A tiny run per API (2 sessions of 3 turns, contexts at 2% of 86K-123K tokens, 8-token
answers): every request completes with a client TTFT, and the input tokens recorded from
the API's own usage are what vLLM's tokenizer counts for the same conversation rendered
as chat (``/tokenize``), and for Anthropic also what ``/v1/messages/count_tokens`` says.
Compaction is off so that every turn grows its session.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import httpx
import pytest

from ttftscope.bench.options import BenchOptions, TargetSpec
from ttftscope.bench.plan.bodies import chat_body, messages_body
from ttftscope.bench.plan.conversations import SyntheticSession
from ttftscope.bench.plan.preparation import prepare
from ttftscope.bench.runner import BenchRun, run_bench
from ttftscope.bench.targets import resolve_targets
from ttftscope.client.apis import Api
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.schema import derive_metrics_url
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e

SESSIONS, TURNS = 2, 3


def _endpoint(vllm: LocalServer) -> Endpoint:
    return Endpoint(
        base_url=vllm.base_url,
        metrics_url=derive_metrics_url(vllm.base_url),
        model=vllm.model,
        timeout_s=300,
    )


def _options(api: Api) -> BenchOptions:
    return BenchOptions(
        sessions=SESSIONS,
        api=api,
        scale=0.02,
        num_prompts=SESSIONS * TURNS,
        think_time_s=0.0,
        max_tokens=8,
        compaction_share=0.0,
        targets=(TargetSpec("direct"),),
        duration_s=120,
    )


async def _sessions(ep: Endpoint, opts: BenchOptions) -> list[SyntheticSession]:
    """The run's conversations, rebuilt from the same seeded plan."""
    async with httpx.AsyncClient(timeout=60) as http:
        prep = await prepare(ep, opts, resolve_targets(ep, opts.targets), http, None, print)
    sessions = [c for c in prep.conversations if isinstance(c, SyntheticSession)]
    assert len(sessions) == SESSIONS
    return sessions


@pytest.fixture(scope="module", params=["messages", "responses"])
def agent_run(
    request: pytest.FixtureRequest, vllm: LocalServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Api, BenchRun, list[SyntheticSession]]]:
    api: Api = request.param
    ep, opts = _endpoint(vllm), _options(api)
    out = tmp_path_factory.mktemp(f"bench-{api}")
    done = asyncio.run(run_bench(ep, opts, result_dir=out))
    yield api, done, asyncio.run(_sessions(ep, opts))


def test_every_request_completes_with_a_client_ttft(
    agent_run: tuple[Api, BenchRun, list[SyntheticSession]],
) -> None:
    api, done, _ = agent_run
    s = done.summary
    assert done.abort is None and s["failed"] == 0, s["failures"]
    assert s["api"] == api and s["completed"] == SESSIONS * TURNS
    for rec in done.records:
        assert rec.ok and rec.variant == api
        assert rec.client_ttft_ms and rec.first_event_ms and rec.completion_tokens
        assert rec.first_event_ms <= rec.client_ttft_ms <= (rec.e2el_ms or 0)


def test_input_tokens_are_what_vllm_counts_and_grow_by_turn(
    agent_run: tuple[Api, BenchRun, list[SyntheticSession]], vllm: LocalServer
) -> None:
    api, done, sessions = agent_run
    root = vllm.base_url.removesuffix("/v1")
    tokens: dict[tuple[int, int], int] = {}
    for r in done.records:
        if r.phase != "warmup":
            assert r.session is not None and r.turn is not None and r.prompt_tokens
            tokens[r.session, r.turn] = r.prompt_tokens
    assert sorted(tokens) == [(s, t) for s in range(SESSIONS) for t in range(TURNS)]
    with httpx.Client(timeout=60) as http:
        for (session, turn), recorded in tokens.items():
            prompt = sessions[session].prompt(turn)
            chat = {**chat_body(prompt, 8), "model": vllm.model, "add_generation_prompt": True}
            counted = http.post(f"{root}/tokenize", json=chat).json()["count"]
            assert recorded == counted, (session, turn)
            if api == "messages":  # and Anthropic's own count of the same body
                body = {**messages_body(prompt, 8), "model": vllm.model}
                said = http.post(f"{vllm.base_url}/messages/count_tokens", json=body).json()
                assert said["input_tokens"] == recorded, (session, turn)
    for session in range(SESSIONS):  # every turn appends: more input than the turn before
        mine = [tokens[session, t] for t in range(TURNS)]
        assert all(0 < a < b for a, b in itertools.pairwise(mine)), mine
