"""Every HTTP stack here names the same fault the same way (``errors.TransportFailure``).

The same scripted servers (``tests.rawserver``, 127.0.0.1) meet the gateway's hop, the
bench's aiohttp transport, the client's httpx stream and both ``/metrics`` scrapers (the
full one and the sampler's light one, which name a failure in ``MetricsError.transport``).
Each transport runs requests through one pool, reads each answer to its end, and reports per
request ``"ok"`` or the neutral failure it mapped its own exception to. The timeouts are
inputs (small where the scenario is a silent server); the outcome asserted is the classified
failure, never a time.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Literal

import httpx
import pytest

from tests.rawserver import (
    CHUNKED_HEAD,
    Handler,
    Scripted,
    chunk,
    reset,
    scripted,
    self_signed,
    sized,
)
from ttftscope.bench.observe.lightscrape import light_scrape
from ttftscope.bench.send.request import encode_stream_body
from ttftscope.bench.send.transport import StreamClient
from ttftscope.client.stream import StreamResult, stream_completion
from ttftscope.errors import MetricsError, TransportFailure
from ttftscope.gateway.transport.hop import HopError, HopTimeouts, UpstreamPool
from ttftscope.metrics.prom import MetricsSnapshot
from ttftscope.metrics.scrape import ascrape_metrics

Outcome = TransportFailure | Literal["ok"]
# sends ``times`` requests through one pool to ``base``; what became of each
Transport = Callable[[str, float, int], Awaitable[list[Outcome]]]

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
ANSWER = sized(EVENT + b"data: [DONE]\n\n", extra=b"Content-Type: text/event-stream\r\n")
METRICS = sized(b"vllm:num_requests_waiting 0\n", extra=b"Content-Type: text/plain\r\n")
SILENT_S = 0.2  # the read timeout where the server goes silent
NEVER_S = 60.0  # a read timeout no other scenario comes near


async def through_hop(base: str, timeout_s: float, times: int) -> list[Outcome]:
    pool = UpstreamPool(base)
    limits = HopTimeouts(connect_s=timeout_s, read_s=timeout_s)
    out: list[Outcome] = []
    try:
        for _ in range(times):
            try:
                answer = await pool.request(
                    "POST", pool.path("/chat/completions"), b"{}", {}, limits
                )
                await answer.read()
            except HopError as exc:
                out.append(exc.kind)
            else:
                out.append("ok")
    finally:
        pool.close()
    return out


def _outcome(result: StreamResult) -> Outcome:
    if result.ok:
        return "ok"
    assert result.transport_failure is not None, f"not a transport failure: {result.error}"
    assert result.error_kind is not None and result.error  # a clean, classified failure
    return result.transport_failure


async def through_bench(base: str, timeout_s: float, times: int) -> list[Outcome]:
    body, out = encode_stream_body(BODY), []
    async with StreamClient() as client:
        for _ in range(times):
            result, _ = await client.stream(
                base + "/chat/completions", body, api_key=None, timeout_s=timeout_s
            )
            out.append(_outcome(result))
    return out


async def through_httpx(base: str, timeout_s: float, times: int) -> list[Outcome]:
    out = []
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(times):
            result = await stream_completion(
                client,
                base_url=base,
                path="/chat/completions",
                body=BODY,
                api_key=None,
                timeout_s=timeout_s,
            )
            out.append(_outcome(result))
    return out


Scrape = Callable[[httpx.AsyncClient, str, float], Awaitable[MetricsSnapshot]]


async def _scrapes(scrape: Scrape, base: str, timeout_s: float, times: int) -> list[Outcome]:
    out: list[Outcome] = []
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(times):
            try:
                await scrape(client, base + "/metrics", timeout_s)
            except MetricsError as exc:
                assert exc.transport is not None, f"not a transport failure: {exc}"
                out.append(exc.transport)
            else:
                out.append("ok")
    return out


async def through_scrape(base: str, timeout_s: float, times: int) -> list[Outcome]:
    async def scrape(client: httpx.AsyncClient, url: str, timeout: float) -> MetricsSnapshot:
        return await ascrape_metrics(url, client=client, timeout=timeout)

    return await _scrapes(scrape, base, timeout_s, times)


async def through_light_scrape(base: str, timeout_s: float, times: int) -> list[Outcome]:
    async def scrape(client: httpx.AsyncClient, url: str, timeout: float) -> MetricsSnapshot:
        return await light_scrape(client, url, timeout=timeout)

    return await _scrapes(scrape, base, timeout_s, times)


TRANSPORTS: dict[str, Transport] = {
    "hop": through_hop,
    "bench": through_bench,
    "httpx": through_httpx,
    "scrape": through_scrape,
    "light-scrape": through_light_scrape,
}


# -- what the server does, per connection -------------------------------------------------
def _answer(head: bytes) -> bytes:
    return METRICS if head.startswith(b"GET ") else ANSWER  # a scrape, or a completion


async def answers(srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    while True:
        w.write(_answer(await srv.request(reader)))


async def resets(srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    await srv.request(reader)
    reset(w)


async def holds_headers(
    srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter
) -> None:
    await srv.request(reader)
    await reader.read()  # silent until the client gives up and closes


async def holds_body(srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    await srv.request(reader)
    w.write(CHUNKED_HEAD + chunk(EVENT))  # headers and a first event, then silence
    await reader.read()


async def drops(srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    await srv.request(reader)
    w.write(CHUNKED_HEAD + chunk(EVENT))
    await w.drain()  # the handler returns: the connection ends without the last chunk


async def closes_reused(
    srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter
) -> None:
    w.write(_answer(await srv.request(reader)))  # keep-alive: the client pools the connection
    await srv.request(reader)  # the next request arrives as the server closes the idle one


async def not_tls(srv: Scripted, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    await reader.read(1)  # a TLS hello, read as HTTP: a plain server answers 400
    w.write(sized(b"Bad Request", "400 Bad Request", b"Connection: close\r\n"))
    await w.drain()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def untrusted_tls(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A server-side TLS context with a self-signed certificate no client trusts."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a throwaway certificate")
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.asyncio
async def test_a_working_server_is_answered(transport: str) -> None:
    async with scripted(answers) as (srv, base):
        assert await TRANSPORTS[transport](base, NEVER_S, 2) == ["ok", "ok"]
    assert srv.connections == 1  # both went over one kept-alive connection


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.asyncio
async def test_nothing_listening_is_refused(transport: str) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    assert await TRANSPORTS[transport](base, NEVER_S, 1) == [TransportFailure.REFUSED]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("handler", "timeout_s", "expected"),
    [
        pytest.param(resets, NEVER_S, TransportFailure.BROKEN, id="reset"),
        pytest.param(holds_headers, SILENT_S, TransportFailure.TIMEOUT, id="slow-headers"),
        pytest.param(holds_body, SILENT_S, TransportFailure.TIMEOUT, id="slow-body"),
        pytest.param(drops, NEVER_S, TransportFailure.BROKEN, id="dropped-mid-body"),
    ],
)
@pytest.mark.asyncio
async def test_a_fault_has_one_name_in_every_transport(
    transport: str, handler: Handler, timeout_s: float, expected: TransportFailure
) -> None:
    async with scripted(handler) as (_, base):
        assert await TRANSPORTS[transport](base, timeout_s, 1) == [expected]


# The gateway retries a request whose pooled connection closed before a byte came back (the
# server was closing it as it was reused, so it did not serve it): a user's request must not
# fail for the gateway's own pooling. A load generator reports it as it happened instead:
# a clean failure, as ``vllm bench serve`` (aiohttp, POST is never resent) does.
RACE: dict[str, list[Outcome]] = {
    "hop": ["ok", "ok"],
    "bench": ["ok", TransportFailure.BROKEN],
    "httpx": ["ok", TransportFailure.BROKEN],
    "scrape": ["ok", TransportFailure.BROKEN],
    "light-scrape": ["ok", TransportFailure.BROKEN],
}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.asyncio
async def test_a_kept_alive_connection_closed_as_it_is_reused(transport: str) -> None:
    async with scripted(closes_reused) as (srv, base):
        assert await TRANSPORTS[transport](base, NEVER_S, 2) == RACE[transport]
    assert srv.connections == (2 if transport == "hop" else 1)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.asyncio
async def test_a_certificate_nobody_vouches_for_is_a_tls_failure(
    transport: str, untrusted_tls: ssl.SSLContext
) -> None:
    async with scripted(answers, tls=untrusted_tls) as (srv, base):
        assert await TRANSPORTS[transport](base, NEVER_S, 1) == [TransportFailure.TLS]
    assert srv.heads == []  # no request went out unprotected


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.asyncio
async def test_https_to_a_plain_http_server_is_a_tls_failure(transport: str) -> None:
    async with scripted(not_tls) as (_, base):
        https = base.replace("http://", "https://", 1)
        assert await TRANSPORTS[transport](https, NEVER_S, 1) == [TransportFailure.TLS]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.asyncio
async def test_plain_http_to_a_tls_server_is_a_broken_exchange(
    transport: str, untrusted_tls: ssl.SSLContext
) -> None:
    async with scripted(answers, tls=untrusted_tls) as (_, base):
        plain = base.replace("https://", "http://", 1)
        assert await TRANSPORTS[transport](plain, NEVER_S, 1) == [TransportFailure.BROKEN]
