"""A stand-in vLLM whose ``/metrics`` waiting gauge follows a script, scrape by scrape."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ttftscope.threadserver import ThreadServer

CACHE_INFO = (
    'vllm:cache_config_info{block_size="16",enable_prefix_caching="True",engine="0",'
    'gpu_memory_utilization="0.9",kv_cache_max_concurrency="2.5",'
    'kv_cache_size_tokens="81920",num_gpu_blocks="5120"} 1.0\n'
)


def exposition(waiting: float, running: float, queued_s: float = 0.0, count: int = 0) -> bytes:
    """One scrape as vLLM 0.32 writes it (the names the doctor reads)."""
    lines = [
        CACHE_INFO,
        f'vllm:num_requests_waiting{{engine="0",model_name="tiny"}} {waiting}\n',
        f'vllm:num_requests_running{{engine="0",model_name="tiny"}} {running}\n',
        'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25\n',
        "# TYPE vllm:request_queue_time_seconds histogram\n",
        f'vllm:request_queue_time_seconds_bucket{{le="+Inf",model_name="tiny"}} {count}\n',
        f'vllm:request_queue_time_seconds_count{{model_name="tiny"}} {count}\n',
        f'vllm:request_queue_time_seconds_sum{{model_name="tiny"}} {queued_s}\n',
    ]
    return "".join(lines).encode()


class QueueServer(ThreadServer):
    """``/metrics`` answers ``waiting[k]`` at its k-th scrape (the last one from then on).

    Each scrape also finishes one request that queued 0.2 s, so a window's mean queue time is
    200 ms whenever it spans two scrapes. ``/server_info`` serves ``max_num_seqs`` when given.
    """

    def __init__(
        self, waiting: Sequence[float], running: float = 4, max_num_seqs: int | None = None
    ) -> None:
        self.waiting, self.running, self.max_num_seqs = list(waiting), running, max_num_seqs
        self.scrapes = 0

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await self._app(scope, send)  # a plain function: uvicorn takes it for ASGI 3

        super().__init__(app, name="stand-in vLLM (queue)")

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _metrics(self) -> bytes:
        k = self.scrapes
        self.scrapes += 1
        waiting = self.waiting[min(k, len(self.waiting) - 1)]
        return exposition(waiting, self.running, queued_s=0.2 * k, count=k)

    def _route(self, path: str) -> tuple[int, bytes]:
        if path == "/metrics":
            return 200, self._metrics()
        if path == "/v1/models":
            return 200, json.dumps({"data": [{"id": "tiny"}]}).encode()
        if path == "/server_info" and self.max_num_seqs is not None:
            info = {"vllm_config": {"scheduler_config": {"max_num_seqs": self.max_num_seqs}}}
            return 200, json.dumps(info).encode()
        return 404, b'{"detail": "Not Found"}'

    async def _app(self, scope: dict[str, Any], send: Any) -> None:
        if scope["type"] != "http":
            return
        status, body = self._route(scope["path"])
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})
