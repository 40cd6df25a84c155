"""A client that leaves closes the gateway's upstream request at any moment, on every route.

The upstream (:mod:`tests.faultserver`'s ``hold_*`` models) holds each request for 60 s:
before its headers (vLLM generating a whole answer), after its headers and part of a JSON
body, or after a stream's first events. The client sends its request on a raw socket, waits
until the upstream holds it, and closes. The gateway must close its upstream connection
while the upstream is still holding: the only way vLLM learns to abort. No wall-time
threshold is asserted (it would move with the machine's load): the close must come long
before the hold ends (60 s) and well before the gateway's own upstream timeout would close
it (600 s); the seconds it took are printed (``-s``), under 2 ms on an idle machine.
A client that leaves while its long prompt is encoded causes no upstream request at all.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.test_limits import MODEL, Gate, _long_text
from tests.gatewaymetrics import gateway_metric
from tests.rawclient import post_raw
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.gateway.transport.asgi import Phase

HOLDS = ("hold_headers", "hold_body", "hold_stream")
# generous: a close that waits for the hold to end (60 s) or a timeout (600 s) fails it
WAIT_S = 20.0
CHAT = [{"role": "user", "content": "hello there"}]

Route = Literal["chat-ids", "chat-translated", "completions", "messages", "responses"]
ROUTES: tuple[Route, ...] = ("chat-ids", "chat-translated", "completions", "messages", "responses")


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer(FaultOptions(models=["tiny-llama", *HOLDS], hold_s=60.0)) as srv:
        yield srv


@pytest.fixture(scope="module")
def gateways(upstream: FaultServer, qwen2_dir: Path) -> Iterator[dict[str, GatewayServer]]:
    """An ids upstream on vLLM's chat (chat-ids), and one on completions (chats translated)."""

    def settings(**kw: Any) -> GatewaySettings:
        up = UpstreamSettings(
            base_url=upstream.base_url("normal"),
            model_dir=qwen2_dir,
            models=("tiny-llama", *HOLDS),
            **kw,
        )
        # no verification: its own upstream request (responses) would be the one held
        return GatewaySettings(upstreams={"ids": up}, verify_first=0)

    with GatewayServer(settings()) as chat_ids, GatewayServer(settings(api="completions")) as comp:
        assert chat_ids.gateway.upstreams[0].api == "chat-ids"
        assert comp.gateway.upstreams[0].api == "completions"
        yield {"chat-ids": chat_ids, "completions": comp}


def _request(route: Route, model: str, stream: bool) -> tuple[str, str, dict[str, Any]]:
    """The gateway's path, the route's name in its metrics, and the body."""
    if route in ("chat-ids", "chat-translated"):
        body = {"model": model, "messages": CHAT, "max_tokens": 3, "stream": stream}
        return "/v1/chat/completions", "chat", body
    if route == "completions":
        return "/v1/completions", "completions", {"model": model, "prompt": "hi", "stream": stream}
    if route == "messages":
        body = {"model": model, "messages": CHAT, "max_tokens": 3, "stream": stream}
        return "/v1/messages", "messages", body
    return "/v1/responses", "responses", {"model": model, "input": "hello", "stream": stream}


def _read_head(sock: socket.socket) -> bytes:
    """The gateway's response head (its stream has begun)."""
    got = b""
    while b"\r\n\r\n" not in got:
        more = sock.recv(4096)
        assert more, f"the gateway closed without an answer: {got!r}"
        got += more
    return got


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("model", HOLDS)
def test_a_client_that_leaves_closes_the_upstream_request(
    upstream: FaultServer, gateways: dict[str, GatewayServer], route: Route, model: str
) -> None:
    gw = gateways["completions" if route == "chat-translated" else "chat-ids"]
    stream = model == "hold_stream"
    path, name, body = _request(route, model, stream)
    metrics = {
        "requests": {"route": name, "status": "499"},
        "left": {"phase": "mid_stream" if stream else "before_answer"},
    }
    before = {k: _metric(gw, k, labels) for k, labels in metrics.items()}
    with post_raw(gw.port, path, body, timeout_s=WAIT_S) as sock:
        hold = upstream.holds.get(timeout=WAIT_S)  # the upstream holds the gateway's request
        want = "/v1/completions" if route in ("chat-translated", "completions") else path
        assert hold.path.endswith(want) and hold.model == model
        if stream:
            assert b" 200 " in _read_head(sock).split(b"\r\n", 1)[0]
        left_at = time.monotonic()
    assert hold.closed.wait(WAIT_S), f"the upstream request was open {WAIT_S:g} s after"
    seconds = hold.closed_at - left_at
    print(f"{route} {model}: upstream closed {seconds * 1000:.1f} ms after the client left")
    assert hold.closed_at - hold.started_at < 60.0  # before the upstream would have finished
    after = {k: _metric(gw, k, labels) for k, labels in metrics.items()}
    assert after["left"] == before["left"] + 1
    # a stream is counted with its 200 when it starts; an answer never begun, as 499
    assert after["requests"] == before["requests"] + (0 if stream else 1)


def _metric(gw: GatewayServer, kind: str, labels: dict[str, str]) -> float:
    name = {"requests": "requests_total", "left": "client_disconnects_total"}[kind]
    return gateway_metric(gw.port, "ttftscope_gateway_" + name, **labels)


@pytest.mark.parametrize("route", ["chat-ids", "messages"])
def test_a_client_that_leaves_during_a_long_encode_causes_no_upstream_request(
    upstream: FaultServer, qwen2_dir: Path, monkeypatch: pytest.MonkeyPatch, route: Route
) -> None:
    gate = Gate(monkeypatch)  # the encode of the long prompt waits at its start
    base = upstream.base_url("normal")
    up = UpstreamSettings(base_url=base, model_dir=qwen2_dir, models=(MODEL,))
    with GatewayServer(GatewaySettings(upstreams={"ids": up}, verify_first=0)) as gw:
        left = threading.Event()
        counted = gw.app.on_left

        def on_left(phase: Phase) -> None:
            counted(phase)
            left.set()

        gw.app.on_left = on_left
        path, _, body = _request(route, MODEL, stream=False)
        body["messages"] = [{"role": "user", "content": _long_text(3)}]
        sent_before = len(upstream.requests)
        with post_raw(gw.port, path, body, timeout_s=WAIT_S):
            assert gate.waiting.wait(WAIT_S)  # the request is being encoded
        try:
            assert left.wait(WAIT_S), "the gateway did not notice the client leave"
        finally:
            gate.open()
        # its handler ended at the encode: it has sent nothing upstream, and never will
        assert [r.path for r in upstream.requests[sent_before:]] == []
        assert gateway_metric(gw.port, "ttftscope_gateway_requests_total", status="499") == 1
        # the encode left behind (still running on its thread) harms no later request
        again = httpx.post(gw.base_url.removesuffix("/v1") + path, json=body, timeout=WAIT_S)
        assert again.status_code == 200, again.text
