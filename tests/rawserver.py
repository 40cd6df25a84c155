"""A scripted raw HTTP/1.1 server on 127.0.0.1, for tests that need byte-level faults.

:mod:`tests.faultserver` is a real ASGI server: it answers HTTP properly and can cut a
stream. Transport tests also need what no framework does on purpose: reset a connection,
hold the headers until the test lets them go, close a keep-alive connection as the next
request arrives, speak TLS with a certificate nobody trusts. Here each connection runs a
handler (a coroutine the test writes) in the test's own event loop::

    async def handle(srv, reader, writer):
        await srv.request(reader)
        writer.write(sized(b"hi"))

    async with scripted(handle) as (srv, base):   # base: http://127.0.0.1:PORT/v1
        ...
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

__all__ = [
    "CHUNKED_HEAD",
    "Handler",
    "Scripted",
    "chunk",
    "reset",
    "scripted",
    "self_signed",
    "sized",
]

Handler = Callable[["Scripted", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


class Scripted:
    """Runs ``handler`` per connection and remembers what it read.

    ``got_request`` is set each time :meth:`request` has read a whole request; ``closed``
    when a connection's handler has ended and the connection is closed.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.heads: list[bytes] = []
        self.got_request = asyncio.Event()
        self.closed = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()
            self.closed.set()

    async def request(self, reader: asyncio.StreamReader) -> bytes:
        """Read one request (head and sized body); its head."""
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        self.got_request.set()
        return head


@asynccontextmanager
async def scripted(
    handler: Handler, *, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[Scripted, str]]:
    """A server running ``handler`` on 127.0.0.1 (over TLS with ``tls``); it and its base URL.

    Handlers still running at the end are cancelled, and their connections closed.
    """
    srv = Scripted(handler)
    server = await asyncio.start_server(srv.serve, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield srv, f"{'https' if tls else 'http'}://127.0.0.1:{port}/v1"
    finally:
        server.close()
        for task in srv.tasks:
            task.cancel()
        await asyncio.gather(*srv.tasks, return_exceptions=True)
        await server.wait_closed()


def sized(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    """A whole answer with a Content-Length (a keep-alive connection stays usable)."""
    return (
        b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n" % (status.encode(), len(body), extra) + body
    )


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (RST) instead of a clean end (FIN)."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 that no client trusts, and its key (openssl)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
