"""Which gateway modules one ``/v1/messages`` request runs, measured with a trace function:
the layout's promise that an API's request stays in its own folder and the shared layers."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

MODEL = "tiny-llama"
BODY: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 32,
    "system": "You are terse.",
    "messages": [{"role": "user", "content": [{"type": "text", "text": "fix the bug"}]}],
}
SRC = Path(__file__).resolve().parents[2] / "src"


class _Seen:
    """The ``ttftscope.gateway`` modules whose functions ran while ``on``, in any thread."""

    def __init__(self) -> None:
        self.on = False
        self.modules: set[str] = set()

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if self.on:
            name = frame.f_globals.get("__name__", "")
            if name.startswith("ttftscope.gateway"):
                self.modules.add(name)


@contextmanager
def _traced() -> Iterator[_Seen]:
    """Every thread started from here on (the gateway's server and pool threads) traced:
    function calls only, so the cost is one Python call per function call."""
    seen = _Seen()
    threading.settrace(seen)
    try:
        yield seen
    finally:
        threading.settrace(None)


def _lines(module: str) -> int:
    path = SRC / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = SRC / module.replace(".", "/") / "__init__.py"
    return len(path.read_text().splitlines())


@pytest.mark.skipif(sys.gettrace() is not None, reason="a tracer (coverage, a debugger) is on")
def test_one_messages_request_runs_its_own_api_and_the_shared_layers_only(
    qwen2_dir: Path, record_property: Any
) -> None:
    with FaultServer() as upstream, _traced() as seen:
        up = UpstreamSettings(
            base_url=upstream.base_url("normal"), model_dir=qwen2_dir, models=(MODEL,)
        )
        with GatewayServer(GatewaySettings(upstreams={"ids": up})) as gw:
            seen.on = True
            answer = httpx.post(gw.base_url + "/messages", content=json.dumps(BODY), timeout=30)
            seen.on = False
        assert answer.status_code == 200, answer.text
        assert "prompt_token_ids" in upstream.last_request.json()["kv_transfer_params"]
    ran = sorted(seen.modules)
    lines = sum(_lines(m) for m in ran)
    record_property("gateway_modules_per_messages_request", len(ran))
    print(f"\none /v1/messages request ran {len(ran)} gateway modules ({lines} lines):")
    print("\n".join(f"  {m} ({_lines(m)})" for m in ran))
    assert {
        "ttftscope.gateway.apis.messages.endpoint",
        "ttftscope.gateway.apis.messages.convert",
        "ttftscope.gateway.apis.messages.vllm_messages",
        "ttftscope.gateway.apis.native",
        "ttftscope.gateway.pipeline.idpath",
        "ttftscope.gateway.routing",
    } <= set(ran)
    # no other API's code, and nothing of the start-up check, runs for a messages request
    others = ("apis.chat.", "apis.completions.", "apis.responses.", "proving.")
    assert [m for m in ran if m.removeprefix("ttftscope.gateway.").startswith(others)] == []
