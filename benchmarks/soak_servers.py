"""The soak benchmark's servers: its fake vLLM 0.32 (``python soak_servers.py PORT MODEL``),
starting them and the gateway, and what it reads of the gateway's processes.

The fake answers chat requests at once (streamed: 16 chunks 10 ms apart) and names in each
answer's ``id`` a hash of the ``kv_transfer_params.prompt_token_ids`` it received ("text"
without them). The id array is hashed as the bytes that came (the gateway writes it compact,
as :func:`ids_hash` does) and cut out before the rest is parsed: a fake that parsed 100K ids
at every turn would take the CPU it stands in for from the clients on the same cores. The
soak runs two of these: one for the long conversations, one of its own for the small chats
(a single-threaded fake busy with 1 MB bodies would delay them itself, which is no stall of
the gateway's; vLLM's API server answers each request on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

MAX_MODEL_LEN = 262_144
Message = MutableMapping[str, Any]
_IDS = b'"prompt_token_ids":['
_LEN = {"max_model_len": MAX_MODEL_LEN}


def ids_hash(ids: list[int]) -> str:
    """What the fake names an answer after: the hash of the compact JSON of ``ids``."""
    return hashlib.sha1(orjson.dumps(ids)).hexdigest()[:16]


def read_request(body: bytes) -> tuple[dict[str, Any], str, int]:
    """The request without its id array, the hash of that array and how many ids it holds.

    >>> read_request(b'{"a":1,"kv_transfer_params":{"prompt_token_ids":[1,2]}}')[1:]
    ('b874a9cb236fc88a', 2)
    >>> ids_hash([1, 2])
    'b874a9cb236fc88a'
    """
    at = body.find(_IDS)
    if at < 0:
        return orjson.loads(body), "text", 0
    start = at + len(_IDS) - 1
    end = body.index(b"]", start) + 1
    array = body[start:end]
    tag = hashlib.sha1(array).hexdigest()[:16]
    return orjson.loads(body[:start] + b"[]" + body[end:]), tag, array.count(b",") + 1


def app_for(model: str) -> Callable[..., Awaitable[None]]:
    """The raw ASGI app of a fake serving ``model``."""

    async def app(
        scope: Message, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Any]
    ) -> None:
        if scope["type"] != "http":
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        routes = {
            "/v1/models": {"data": [{"id": model, "object": "model", **_LEN}]},
            "/version": {"version": "0.32.0"},
        }
        if scope["method"] == "GET":
            await _send_json(send, routes.get(scope["path"], {}))
            return
        request, tag, count = read_request(b"".join(parts))
        usage = {"prompt_tokens": count, "completion_tokens": 16}
        if not request.get("stream"):
            await _send_json(send, {"id": tag, "choices": [], "usage": usage})
            return
        start = {"type": "http.response.start", "status": 200}
        await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(16):
            chunk = {"id": tag, "choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
            await send({"type": "http.response.body", "body": _sse(chunk), "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    return app


def _sse(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _send_json(send: Callable[[Message], Any], obj: object) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": orjson.dumps(obj)})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def started(cmd: list[str], health: str) -> Iterator[subprocess.Popen[bytes]]:
    """``cmd`` in its own process, once ``health`` answers 200; stopped on exit."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{' '.join(cmd[:5])} did not start")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(health, timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def workers_ready(gw: str, wanted: int, bound_s: float = 120.0) -> int:
    """Wait until the gateway's ``wanted`` encode workers have loaded their tokenizers (the
    idle phase is the gateway at rest, not starting up); how many run."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        ready = gauge(httpx.get(gw + "/metrics").text, "ttftscope_gateway_encode_processes")
        if ready >= wanted:
            return int(ready)
        time.sleep(0.1)
    raise SystemExit(f"the gateway's encode workers were not ready within {bound_s:g} s")


def processes(setting: int | str | None) -> int:
    """How many encode processes a gateway runs with ``encode_processes = setting`` (None:
    not set, its default)."""
    from ttftscope.config.schema import GatewaySettings

    if setting is None:
        return GatewaySettings().processes()
    return GatewaySettings.model_validate({"encode_processes": setting}).processes()


def workers_rss_mb(pid: int) -> float:
    """RSS of ``pid``'s child processes (the gateway's encode workers), MB."""
    kids = [
        int(k) for f in Path(f"/proc/{pid}/task").glob("*/children") for k in f.read_text().split()
    ]
    return sum(rss_mb(k) for k in kids)


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def gauge(metrics: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", metrics, re.M)
    return float(match.group(1)) if match else float("nan")


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(
        app_for(sys.argv[2]),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="critical",
        loop="uvloop",
        http="httptools",
        access_log=False,
    )
