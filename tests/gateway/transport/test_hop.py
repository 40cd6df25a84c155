"""The gateway's upstream client against scripted raw HTTP servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rawserver import CHUNKED_HEAD, Scripted, chunk, scripted, self_signed, sized
from ttftscope.errors import TransportFailure
from ttftscope.gateway.transport.hop import AnswerTooLarge, HopError, HopTimeouts, UpstreamPool

QUICK = HopTimeouts(connect_s=2.0, read_s=5.0)
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer up-key"}


async def fetch(base: str, times: int, method: Literal["GET", "POST"] = "POST") -> list[bytes]:
    """``times`` requests through one pool, each answer read whole."""
    pool = UpstreamPool(base)
    bodies = []
    for _ in range(times):
        answer = await pool.request(method, pool.path("/x"), b"{}", HEADERS, QUICK)
        bodies.append(await answer.read())
    pool.close()
    return bodies


@pytest.mark.asyncio
async def test_answers_are_read_whole_and_the_connection_is_reused() -> None:
    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        while True:
            await srv.request(reader)
            writer.write(sized(b'{"ok":true}', extra=b"Retry-After: 7\r\n"))

    async with scripted(handle) as (srv, base):
        pool = UpstreamPool(base)
        for _ in range(3):
            answer = await pool.request(
                "POST", pool.path("/chat/completions"), b"{}", HEADERS, QUICK
            )
            assert (answer.status, await answer.read()) == (200, b'{"ok":true}')
            assert answer.headers["retry-after"] == "7"
        pool.close()
    assert srv.connections == 1
    head = srv.heads[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert f"Host: {base.split('/')[2]}" in head and "Authorization: Bearer up-key" in head


@pytest.mark.asyncio
async def test_a_stream_arrives_chunk_by_chunk_before_it_ends() -> None:
    first_seen = asyncio.Event()

    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        await first_seen.wait()  # the rest only once the client has the first event
        writer.write(chunk(b"data: 2\n\n") + b"0\r\n\r\n")
        await reader.read()

    async with scripted(handle) as (_, base):
        pool = UpstreamPool(base)
        answer = await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        got = []
        async for part in answer.chunks():
            got.append(part)
            first_seen.set()
        answer.release()
        pool.close()
    assert b"".join(got) == b"data: 1\n\ndata: 2\n\n" and got[0] == b"data: 1\n\n"


@pytest.mark.asyncio
async def test_an_answer_that_ends_with_the_connection_is_whole_and_not_reused() -> None:
    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        await writer.drain()

    async with scripted(handle) as (srv, base):
        assert await fetch(base, 2, "GET") == [b"all of it"] * 2
    assert srv.connections == 2


@pytest.mark.asyncio
async def test_a_pooled_connection_the_server_closed_is_retried_on_a_fresh_one() -> None:
    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        writer.write(sized(b"one"))
        await writer.drain()
        # keep-alive said nothing, yet the server closes once the next request arrives
        await reader.read(1)

    async with scripted(handle) as (srv, base):
        assert await fetch(base, 3) == [b"one"] * 3
    assert srv.connections == 3


@pytest.mark.asyncio
async def test_failures_say_how_the_exchange_failed() -> None:
    async def stall(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await reader.read()

    async def break_off(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        await writer.drain()

    async def garbage(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"this is not HTTP\r\n\r\n")
        await reader.read()

    short = HopTimeouts(connect_s=2.0, read_s=0.2)
    async with scripted(stall) as (_, base):
        pool = UpstreamPool(base)
        with pytest.raises(HopError) as late:
            await pool.request("POST", pool.path("/x"), b"{}", HEADERS, short)
        assert late.value.kind is TransportFailure.TIMEOUT and "0.2 s" in str(late.value)
    async with scripted(break_off) as (_, base):
        pool = UpstreamPool(base)
        answer = await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        with pytest.raises(HopError) as broken:
            _ = [part async for part in answer.chunks()]
        assert broken.value.kind is TransportFailure.BROKEN
    async with scripted(garbage) as (_, base):
        pool = UpstreamPool(base)
        with pytest.raises(HopError) as bad:
            await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        assert bad.value.kind is TransportFailure.BROKEN and "invalid HTTP" in str(bad.value)
    refused = UpstreamPool("http://127.0.0.1:9/v1")
    with pytest.raises(HopError) as gone:
        await refused.request("POST", refused.path("/x"), b"{}", HEADERS, QUICK)
    assert gone.value.kind is TransportFailure.REFUSED and "ConnectionRefusedError" in str(
        gone.value
    )
    assert "127.0.0.1" not in str(gone.value)  # clients read it: no internal addresses


@pytest.mark.asyncio
async def test_a_slow_reader_holds_the_upstream_back_without_timing_out() -> None:
    total, read_s = 48 << 20, 0.2
    held_back, done = asyncio.Event(), asyncio.Event()

    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % total)
        high = writer.transport.get_write_buffer_limits()[1]
        for _ in range(total >> 20):
            writer.write(b"x" * (1 << 20))
            if writer.transport.get_write_buffer_size() > high:
                held_back.set()  # the drain below waits: the client stopped reading
            await writer.drain()
        done.set()

    async with scripted(handle) as (srv, base):
        pool = UpstreamPool(base)
        answer = await pool.request(
            "POST", pool.path("/x"), b"{}", HEADERS, HopTimeouts(connect_s=2, read_s=read_s)
        )
        await held_back.wait()
        # nothing arrives for three read timeouts: a hop that took its own pause for a
        # silent upstream would give up and close the connection
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(srv.closed.wait(), 3 * read_s)
        assert not done.is_set()  # the server is held back, not buffered into memory
        assert len(await answer.read()) == total
        pool.close()


@pytest.mark.asyncio
async def test_a_request_cancelled_while_waiting_closes_its_connection() -> None:
    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        await reader.read()  # returns at EOF: the client closed

    async with scripted(handle) as (srv, base):
        pool = UpstreamPool(base)
        task = asyncio.ensure_future(pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK))
        await srv.got_request.wait()  # the request is out: the client waits for the answer
        task.cancel()
        await srv.closed.wait()


def test_paths_and_addresses_come_from_the_base_url() -> None:
    pool = UpstreamPool("https://api.example.com/openai/v1/")
    assert (pool.host, pool.port, pool.tls) == ("api.example.com", 443, True)
    assert pool.path("/models") == "/openai/v1/models"
    assert pool.path("/tokenize", root=True) == "/openai/tokenize"
    with pytest.raises(ValueError, match="http"):
        UpstreamPool("ftp://host/v1")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=12))
def test_any_chunking_gives_back_the_same_bytes(parts: list[bytes]) -> None:
    async def run() -> bytes:
        async def handle(
            srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            await srv.request(reader)
            writer.write(CHUNKED_HEAD)
            for part in parts:
                writer.write(chunk(part))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await reader.read()

        async with scripted(handle) as (_, base):
            return (await fetch(base, 1))[0]

    assert asyncio.run(run()) == b"".join(parts)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
@pytest.mark.asyncio
async def test_https_upstreams_are_verified_and_spoken_to_over_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(sized(b"over tls"))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    base = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        untrusted = UpstreamPool(base)  # a certificate nobody vouches for is refused
        with pytest.raises(HopError) as refused:
            await untrusted.request("GET", untrusted.path("/models"), b"", HEADERS, QUICK)
        assert refused.value.kind is TransportFailure.TLS and "CERTIFICATE" in str(refused.value)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusted = UpstreamPool(base)
        answer = await trusted.request("GET", trusted.path("/models"), b"", HEADERS, QUICK)
        assert await answer.read() == b"over tls"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.asyncio
async def test_a_read_cancelled_halfway_closes_its_connection() -> None:
    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes.")
        await reader.read()  # returns at EOF: the client closed

    async with scripted(handle) as (srv, base):
        pool = UpstreamPool(base)
        answer = await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        reading = asyncio.Event()

        async def read() -> bytes:
            reading.set()
            return await answer.read()  # waits, in this same step, for the other 90 bytes

        task = asyncio.ensure_future(read())
        await reading.wait()
        task.cancel()
        await srv.closed.wait()


@pytest.mark.asyncio
async def test_a_whole_answer_past_the_cap_is_refused_and_its_connection_dropped() -> None:
    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        writer.write(CHUNKED_HEAD)
        for _ in range(64):  # 64 KB in 1 KB chunks, past the 10 KB cap
            writer.write(chunk(b"x" * 1024))
            await writer.drain()
        await reader.read()  # until the client closes

    async with scripted(handle) as (srv, base):
        pool = UpstreamPool(base, max_answer=10 * 1024)
        answer = await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        with pytest.raises(AnswerTooLarge, match="larger than 10,240 bytes"):
            await answer.read()
        await asyncio.wait_for(srv.closed.wait(), 10)  # not kept, not pooled
        pool.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("declared", [True, False])
async def test_an_answer_read_capped_gives_what_came_past_the_cap_and_the_rest_follows(
    declared: bool,
) -> None:
    big = bytes(range(256)) * 256  # 64 KB, past the 10 KB cap
    more = asyncio.Event()

    async def handle(
        srv: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await srv.request(reader)
        if declared:
            writer.write(sized(big))
        else:
            writer.write(CHUNKED_HEAD)
            for i in range(0, len(big), 1024):
                if i == 12 * 1024:
                    await more.wait()  # the rest once the client has what came past the cap
                writer.write(chunk(big[i : i + 1024]))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        await srv.request(reader)
        writer.write(sized(b'{"ok":true}'))
        await reader.read()

    async with scripted(handle) as (srv, base):
        pool = UpstreamPool(base, max_answer=10 * 1024)
        answer = await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        parts, whole = await answer.read_capped()
        assert not whole
        more.set()
        # a declared size says so before any byte is read; else what came, past the cap
        got = sum(map(len, parts))
        assert got == 0 if declared else 10 * 1024 < got <= 12 * 1024
        rest = [part async for part in answer.chunks()]
        assert b"".join(parts + rest) == big
        answer.release()  # read to its end: the connection serves the next request
        small = await pool.request("POST", pool.path("/x"), b"{}", HEADERS, QUICK)
        assert await small.read_capped() == ([b'{"ok":true}'], True)
        pool.close()
    assert srv.connections == 1
