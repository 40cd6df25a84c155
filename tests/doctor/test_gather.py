"""What the doctor reads live: the server's ``--max-num-seqs`` where vLLM serves it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ttftscope.client.endpoint import Endpoint
from ttftscope.config.loader import load_settings
from ttftscope.doctor.gather import read_live
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


def test_without_server_info_the_limit_is_unknown_and_nothing_else_changes() -> None:
    seqs, checked = _live(server_info=False)
    assert seqs is None and not any("--max-num-seqs" in c for c in checked)
    assert any("server metrics" in c for c in checked)
