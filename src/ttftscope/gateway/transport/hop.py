"""The gateway's upstream HTTP/1.1 client: pooled keep-alive connections, llhttp parsing.

The hop to vLLM is on every request's critical path twice (the request out, the first
token back), so it is a bare asyncio protocol with httptools (the parser uvicorn uses)
rather than a general client. Measured against a trivial streaming upstream on these
2-core machines, a bare relay adds 0.50-0.65 ms p50 to time to first token on aiohttp and
0.29-0.38 ms on this; the whole gateway in text mode went from 0.76 to 0.38-0.43 ms
(``benchmarks/gateway_hop.py``). It does what the gateway needs and nothing else:
``GET``/``POST`` with a prepared body, answers read whole (up to a cap) or as they arrive
(chunked, sized, or up to the close), a connect and a between-reads timeout, TLS for ``https``
upstreams, and back-pressure (reading pauses while a slow client has not taken what came).

Failures are one exception, :class:`HopError`, whose ``kind`` is how the exchange failed in
the vocabulary every client here shares (:class:`~ttftscope.errors.TransportFailure`): the
gateway answers a ``timeout`` with 504, any other (refused, DNS, TLS, connect, broken) 502.

>>> pool = UpstreamPool("http://127.0.0.1:8000/v1")
>>> pool.path("/chat/completions"), pool.path("/tokenize", root=True)
('/v1/chat/completions', '/tokenize')
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Literal, cast
from urllib.parse import urlsplit

import httptools

from ttftscope.errors import TransportFailure, os_failure

# a client slower than its stream: stop reading the upstream past this, go on below the low
_HIGH_WATER = 1 << 20
_LOW_WATER = 1 << 18
# idle connections go before uvicorn's (vLLM's) 5 s keep-alive ends: reusing one the
# server is closing fails the request
_KEEPALIVE_S = 4.0
_MAX_IDLE = 256
# the most of a whole answer held, unless the pool says otherwise
MAX_ANSWER = 128 << 20


class HopError(Exception):
    """An upstream exchange failed: ``kind`` is how, the message says what happened."""

    def __init__(self, kind: TransportFailure, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class AnswerTooLarge(HopError):
    """A whole answer past the pool's ``max_answer`` bytes: read no further, not kept."""

    def __init__(self, limit: int) -> None:
        super().__init__(TransportFailure.BROKEN, f"an answer larger than {limit:,} bytes")
        self.limit = limit


@dataclass(frozen=True)
class HopTimeouts:
    """Seconds to connect, and at most between two reads of an answer."""

    connect_s: float
    read_s: float


class _Connection(asyncio.Protocol):
    """One upstream connection; it carries one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.idle_since = 0.0
        self._loop = asyncio.get_running_loop()
        self._begin(0.0)

    def _begin(self, read_s: float) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: dict[str, str] = {}
        self.has_head = False
        self.complete = False
        self.keep_alive = False
        self.got_bytes = False
        self.error: HopError | None = None
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._until_close = False
        self._read_s = read_s
        self._last_read = self._loop.time()
        self._timer: asyncio.TimerHandle | None = None

    def start(self, read_s: float) -> None:
        """Ready for a new exchange, with its between-reads timeout armed."""
        self._begin(read_s)
        if self.lost:  # closed between connecting and now: nothing will come
            self.error = HopError(TransportFailure.BROKEN, "the upstream closed the connection")
        self._timer = self._loop.call_at(self._last_read + read_s, self._check_timeout)

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        self._last_read = self._loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HopError(TransportFailure.BROKEN, f"the upstream sent invalid HTTP ({exc})"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.has_head and self._until_close and not self.complete:
            self.complete = True  # an answer that ends where the connection does
            self._wake()
        elif not self.complete:
            self._fail(
                HopError(TransportFailure.BROKEN, "the upstream closed the connection mid-answer")
            )
        self._stop_timer()

    # -- httptools callbacks --------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.has_head = True
        sized = "content-length" in self.headers
        self._until_close = not sized and "chunked" not in self.headers.get("transfer-encoding", "")
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()
        self._stop_timer()
        self._wake()

    # -- the consumer's side --------------------------------------------------------------
    async def head(self) -> None:
        """Wait for the answer's status line and headers."""
        while not self.has_head:
            if self.error is not None:
                raise self.error
            await self._wait()

    async def take(self) -> bytes | None:
        """All body bytes that have arrived (waiting for some), or None at the end."""
        while not self._body:
            if self.error is not None:
                raise self.error
            if self.complete:
                return None
            await self._wait()
        chunk = self._body.popleft() if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self._last_read = self._loop.time()  # the pause was ours, not the upstream's
            self.transport.resume_reading()
        return chunk

    def close(self) -> None:
        """Drop the connection (a stream the client left: vLLM aborts the request)."""
        self._stop_timer()
        if self.transport is not None:
            self.transport.close()
        self.lost = True

    # -- internals ------------------------------------------------------------------------
    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: HopError) -> None:
        if self.error is None:
            self.error = error
        self._stop_timer()
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _check_timeout(self) -> None:
        # one timer per exchange, moved on lazily: cheaper than re-arming on every read
        self._timer = None
        if self.complete or self.error is not None:
            return
        now = self._loop.time()
        if self._paused:  # our own pause (a slow client): the upstream is not late
            self._timer = self._loop.call_at(now + self._read_s, self._check_timeout)
            return
        due = self._last_read + self._read_s
        if due > now:
            self._timer = self._loop.call_at(due, self._check_timeout)
            return
        self._fail(
            HopError(TransportFailure.TIMEOUT, f"no data from the upstream for {self._read_s:g} s")
        )

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Answer:
    """An upstream answer: status and headers now, the body whole or as it arrives."""

    def __init__(self, pool: UpstreamPool, conn: _Connection) -> None:
        self.status = conn.status
        self.headers: Mapping[str, str] = conn.headers
        self._pool, self._conn = pool, conn
        self.cap = pool.max_answer  # the most bytes of it read() and read_capped() hold

    async def read(self) -> bytes:
        """The whole body (the connection goes back to the pool); past :attr:`cap`
        :class:`AnswerTooLarge`, its connection closed: it is never held whole."""
        parts, whole = await self.read_capped()
        if not whole:
            self.close()
            raise AnswerTooLarge(self.cap)
        return b"".join(parts)

    async def read_capped(self) -> tuple[list[bytes], bool]:
        """The whole body and True (the connection goes back to the pool); or, as soon as
        its ``Content-Length`` or its bytes so far pass :attr:`cap`, the parts read so far
        (none for a declared size) and False: the rest comes from :meth:`chunks`, and the
        caller releases or closes. Closed on failure.
        """
        limit = self.cap
        parts: list[bytes] = []
        size = 0
        try:
            declared = self.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                return parts, False
            while (chunk := await self._conn.take()) is not None:
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    return parts, False
        except BaseException:
            self.close()
            raise
        self.release()
        return parts, True

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """Body bytes as they arrive; :class:`HopError` if the answer breaks off."""
        while (chunk := await self._conn.take()) is not None:
            yield chunk

    def release(self) -> None:
        """Done with the answer: a finished one's connection is reused, others closed."""
        self._pool.give_back(self._conn)

    def close(self) -> None:
        """Drop the connection now (the client left: the upstream stops working on it)."""
        self._conn.close()


class UpstreamPool:
    """Keep-alive connections to one server; ``base_url`` as in the configuration,
    ``max_answer`` the most bytes of a whole answer :meth:`Answer.read` holds."""

    def __init__(self, base_url: str, max_answer: int = MAX_ANSWER) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"an upstream base_url must be http(s)://host[:port]/…: {base_url}")
        self.host = url.hostname
        self.max_answer = max_answer
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self._prefix = url.path.rstrip("/")
        self._host_header = url.netloc.rsplit("@", 1)[-1].encode("idna")
        self._idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if self.tls else None

    def path(self, path: str, *, root: bool = False) -> str:
        """``path`` under the base URL's path, or with ``root`` under the server's root
        (the base URL without its ``/v1``: where vLLM serves ``/tokenize``)."""
        prefix = self._prefix
        if root and prefix.endswith("/v1"):
            prefix = prefix[: -len("/v1")]
        return prefix + path

    async def request(
        self,
        method: Literal["GET", "POST"],
        target: str,
        data: bytes,
        headers: Mapping[str, str],
        timeouts: HopTimeouts,
    ) -> Answer:
        """Send one request to ``target`` (a path from :meth:`path`); its answer once the
        status line and headers are in.

        A pooled connection the server closed as it was reused gets no answer at all, so
        the request was not served: it goes once more, on a fresh connection.
        """
        head = self._head(method, target, len(data), headers)
        while True:
            conn, reused = self._take_idle(), True
            if conn is None:
                conn, reused = await self._connect(timeouts.connect_s), False
            conn.start(timeouts.read_s)
            assert conn.transport is not None
            conn.transport.writelines((head, data))
            try:
                await conn.head()
            except HopError as exc:
                conn.close()
                if reused and exc.kind is TransportFailure.BROKEN and not conn.got_bytes:
                    continue
                raise
            except BaseException:
                conn.close()  # cancelled while waiting: the upstream stops working on it
                raise
            return Answer(self, conn)

    def give_back(self, conn: _Connection) -> None:
        """Pool a connection whose answer was read to its end; close any other."""
        if conn.complete and conn.keep_alive and not conn.lost and len(self._idle) < _MAX_IDLE:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Close every idle connection (answers still being read close their own)."""
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    def _take_idle(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()  # the most recent: the least likely to be closing
            transport = conn.transport
            if conn.lost or transport is None or transport.is_closing():
                continue
            if now - conn.idle_since > _KEEPALIVE_S:
                conn.close()
                continue
            return conn
        return None

    async def _connect(self, timeout_s: float) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, conn = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self.tls else None,
                )
        except TimeoutError:
            raise HopError(
                TransportFailure.TIMEOUT, f"no connection within {timeout_s:g} s"
            ) from None
        except OSError as exc:  # refused, no route, DNS, TLS handshake
            kind = os_failure(exc) or TransportFailure.CONNECT
            raise HopError(kind, f"{type(exc).__name__}: {_reason(exc)}") from None
        return conn

    def _head(self, method: str, target: str, length: int, headers: Mapping[str, str]) -> bytes:
        lines = [
            f"{method} {target} HTTP/1.1".encode(),
            b"Host: " + self._host_header,
            b"Content-Length: %d" % length,
        ]
        lines += [f"{k}: {v}".encode("latin-1") for k, v in headers.items()]
        return b"\r\n".join(lines) + b"\r\n\r\n"


def _reason(exc: OSError) -> str:
    """What went wrong, without the address (messages reach clients in 502 bodies)."""
    if exc.errno and exc.errno > 0 and not isinstance(exc, ssl.SSLError):
        return os.strerror(exc.errno)  # uvloop's own text names the address
    return exc.strerror or str(exc)  # DNS and TLS: their text says what failed
