"""An httpx transport that sends through aiohttp: the same stream code, a faster HTTP stack.

:func:`~ttftscope.client.stream.stream_completion` is written against httpx. Under load,
httpx's own stack (httpcore's pool, h11 in pure Python, anyio) costs ~2 ms of CPU per
streamed request here; aiohttp's C parser costs a quarter of that, and is what ``vllm bench
serve`` sends with. This transport keeps the httpx ``Request``/``Response`` seam, so the
timing, SSE decoding and failure classification stay the shared ones: aiohttp's errors are
raised as the httpx errors httpx would raise, with the original exception chained (the
classifier looks for ``ConnectionRefusedError``, ``socket.gaierror``, ``ssl.SSLError`` in
the chain).

What is lost: httpcore's trace events, so records of bench requests have no
``connect_ms`` / ``request_sent_ms`` (headers, first event, first content and last byte
are timed as always). Compression is left to httpx (aiohttp does not decompress).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx

# hop-by-hop or computed headers aiohttp sets itself
_SKIP = frozenset({"host", "content-length", "connection", "transfer-encoding"})


def _as_httpx(exc: BaseException, *, sent: bool) -> httpx.HTTPError:
    """The httpx error for an aiohttp failure (``sent``: the response had begun)."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(exc, aiohttp.ClientConnectorError) and not sent:
        return httpx.ConnectError(message)
    return httpx.RemoteProtocolError(message)


class _Body(httpx.AsyncByteStream):
    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._resp.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _as_httpx(exc, sent=True) from exc

    async def aclose(self) -> None:
        if self._resp.content.at_eof():
            self._resp.release()  # read to the end: the connection goes back to the pool
        else:
            self._resp.close()  # left early: close it, so the server aborts the request


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends httpx requests with one aiohttp session (created on first use, in the loop).

    >>> import asyncio; asyncio.run(AiohttpTransport().aclose())
    """

    def __init__(self, *, connections: int = 1, tls: ssl.SSLContext | None = None) -> None:
        self._connections, self._tls = connections, tls
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._connections, ssl=self._tls or True)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout()
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        limits = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=limits.get("connect"), sock_read=limits.get("read")
        )
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _SKIP]
        try:
            resp = await self._open().request(
                request.method,
                str(request.url),
                headers=headers,
                data=await request.aread(),
                timeout=timeout,
                allow_redirects=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _as_httpx(exc, sent=False) from exc
        return httpx.Response(
            status_code=resp.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
            stream=_Body(resp),
            request=request,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
