"""The bench's aiohttp stream answers like the client's httpx one: same results, same kinds."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope.bench.send.request import encode_stream_body
from ttftscope.bench.send.transport import StreamClient
from ttftscope.client.stream import PhaseTimes, StreamResult, stream_completion

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
BODY = {"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}]}
KEY = "sk-test-key-123"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _both(base: str, timeout_s: float = 5.0) -> tuple[StreamResult, list[int], StreamResult]:
    async def main() -> tuple[StreamResult, list[int], StreamResult]:
        async with StreamClient() as client:
            ours, stamps = await client.stream(
                base + "/chat/completions",
                encode_stream_body(BODY),
                api_key=KEY,
                timeout_s=timeout_s,
            )
        async with httpx.AsyncClient() as http:
            theirs = await stream_completion(
                http,
                base_url=base,
                path="/chat/completions",
                body=BODY,
                api_key=KEY,
                timeout_s=timeout_s,
            )
        return ours, stamps, theirs

    return asyncio.run(main())


def _view(r: StreamResult) -> tuple[object, ...]:
    timed = {name for name, ms in r.phases if ms is not None}
    return (
        r.ok,
        r.status,
        r.error_kind,
        r.retry_after,
        r.text,
        r.model,
        r.prompt_tokens,
        r.completion_tokens,
        r.cached_tokens,
        r.finish_reason,
        r.events,
        r.content_events,
        timed - {"connect_ms", "request_sent_ms"},  # httpx's trace events only
    )


def test_every_fault_scenario_ends_the_same_way() -> None:
    with FaultServer(FaultOptions(header_delay_s=0.5, chunk_delay_s=0.005)) as srv:
        for scenario in SCENARIOS:
            timeout = 0.2 if scenario == "slow_headers" else 5.0
            ours, stamps, theirs = _both(srv.base_url(scenario), timeout)
            assert _view(ours) == _view(theirs), scenario
            assert ours.request_bytes == theirs.request_bytes, scenario
            if scenario == "normal":
                assert len(stamps) == ours.content_events == 3
        assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"
        assert srv.requests[0].headers["accept"] == "text/event-stream"


def test_phases_are_in_order() -> None:
    with FaultServer(FaultOptions(first_content_delay_s=0.01, chunk_delay_s=0.01)) as srv:
        ours, _, _ = _both(srv.base_url())
    ph: PhaseTimes = ours.phases
    assert ph.headers_ms is not None and ph.first_event_ms is not None
    assert ph.first_content_ms is not None and ph.last_byte_ms is not None
    assert 0 < ph.headers_ms <= ph.first_event_ms <= ph.first_content_ms
    assert ph.first_event_ms <= ph.last_byte_ms


@pytest.mark.parametrize(
    "base", [f"http://127.0.0.1:{_closed_port()}/v1", "http://no-such-host.invalid/v1"]
)
def test_unreachable_servers_are_classified_alike(base: str) -> None:
    ours, _, theirs = _both(base)
    assert ours.error_kind == theirs.error_kind and not ours.ok


def test_the_api_key_never_appears_in_an_error() -> None:
    with FaultServer() as srv:
        ours, _, _ = _both(srv.base_url("unauthorized"))
    assert not ours.ok and KEY not in (ours.error or "")
