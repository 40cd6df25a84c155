"""The aiohttp transport answers like httpx's own: same results, same failure kinds."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope.bench.transport import AiohttpTransport
from ttftscope.client.stream import StreamResult, stream_completion

SCENARIOS = [
    "normal",
    "rate_limited",
    "server_error",
    "unauthorized",
    "html",
    "drop",
    "truncated",
    "stream_error",
    "odd_chunks",
    "slow_headers",
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _send(transport: httpx.AsyncBaseTransport, base: str, timeout_s: float) -> StreamResult:
    async with httpx.AsyncClient(transport=transport) as client:
        return await stream_completion(
            client,
            base_url=base,
            path="/chat/completions",
            body={"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}]},
            api_key="sk-test-key-123",
            timeout_s=timeout_s,
        )


def _both(base: str, timeout_s: float = 5.0) -> tuple[StreamResult, StreamResult]:
    async def main() -> tuple[StreamResult, StreamResult]:
        ours = await _send(AiohttpTransport(), base, timeout_s)
        theirs = await _send(httpx.AsyncHTTPTransport(), base, timeout_s)
        return ours, theirs

    return asyncio.run(main())


def _view(r: StreamResult) -> tuple[object, ...]:
    return (r.ok, r.status, r.error_kind, r.retry_after, r.text, r.completion_tokens)


def test_every_fault_scenario_ends_the_same_way() -> None:
    with FaultServer(FaultOptions(header_delay_s=0.5, chunk_delay_s=0.005)) as srv:
        for scenario in SCENARIOS:
            timeout = 0.2 if scenario == "slow_headers" else 5.0
            ours, theirs = _both(srv.base_url(scenario), timeout)
            assert _view(ours) == _view(theirs), scenario
            assert (ours.phases.first_content_ms is None) == (
                theirs.phases.first_content_ms is None
            )
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test-key-123"


@pytest.mark.parametrize(
    "base", [f"http://127.0.0.1:{_closed_port()}/v1", "http://no-such-host.invalid/v1"]
)
def test_unreachable_servers_are_classified_alike(base: str) -> None:
    ours, theirs = _both(base)
    assert ours.error_kind == theirs.error_kind and not ours.ok
