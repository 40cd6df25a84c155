"""The bench's HTTP stack: one streamed request over aiohttp, timed and folded as the client's.

Under load the load generator's CPU per request is its ceiling. httpx (its client, URL and
header models, cookie jar, redirect and auth layers, even above a fast transport) cost
~0.6 ms of CPU per streamed request here, more than everything else a bench request does;
``vllm bench serve`` sends with aiohttp directly. So bench requests do too, and keep the
shared parts: :class:`~ttftscope.client.stream.StreamRun` times the phases and builds the
result, :func:`~ttftscope.client.events.fold_chunk` decodes the events, and
:mod:`ttftscope.client.classify` names failures: aiohttp's exceptions reach it as the neutral
:class:`~ttftscope.errors.TransportFailure`, mapped once in :func:`aiohttp_fault`.

Content chunks are stamped here as they arrive (``perf_counter_ns``), for inter-token
latency. What httpx's traces gave and this does not: ``connect_ms`` and ``request_sent_ms``
(headers, first event, first content and last byte are timed as always).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping
from types import TracebackType

import aiohttp

from ttftscope.bench.send.chunks import carries_content
from ttftscope.client.apis import Api, api_headers
from ttftscope.client.classify import (
    TransportFault,
    classify_status,
    classify_transport,
    not_an_api,
)
from ttftscope.client.events import fold_chunk, fold_end
from ttftscope.client.sse import SSEDecoder
from ttftscope.client.stream import StreamResult, StreamRun, request_headers
from ttftscope.config.redact import header_secrets
from ttftscope.errors import TransportFailure, os_failure

_BODY_CAP = 65536  # bytes of an error body kept for its message, as the client keeps


def aiohttp_fault(exc: BaseException) -> TransportFault:
    """How an aiohttp request failed, in the vocabulary every client here shares.

    aiohttp chains the operating system's error (refused, DNS, TLS) to its own; its timeouts
    are ``TimeoutError`` s; what fails after connecting is an exchange that broke off.

    >>> aiohttp_fault(aiohttp.ServerDisconnectedError()).failure
    <TransportFailure.BROKEN: 'broken'>
    """
    if isinstance(exc, TimeoutError):
        failure = TransportFailure.TIMEOUT
    elif isinstance(exc, aiohttp.ClientConnectorError | aiohttp.InvalidURL):
        failure = os_failure(exc) or TransportFailure.CONNECT
    else:
        failure = os_failure(exc) or TransportFailure.BROKEN
    return TransportFault(failure, type(exc).__name__, str(exc) or type(exc).__name__)


class StreamClient:
    """One session worker's aiohttp session (opened on entry, in the running loop).

    A worker has one request in flight, so ``connections`` (one per target) is its whole
    pool, and no worker waits on another's.

    >>> import asyncio, json
    >>> messages = [{"role": "user", "content": "hi"}]
    >>> body = {"model": "tiny-llama", "stream": True, "messages": messages}
    >>> async def main() -> tuple[StreamResult, list[int]]:
    ...     async with StreamClient() as client:
    ...         return await client.stream(
    ...             server_url + "/chat/completions", json.dumps(body).encode(), api_key=None,
    ...             timeout_s=30)
    >>> result, stamps = asyncio.run(main())
    >>> result.ok, result.text, len(stamps) >= 1  # chunks read together share one stamp
    (True, 'Hello wörld', True)
    """

    def __init__(self, *, connections: int = 1, tls: ssl.SSLContext | None = None) -> None:
        self._connections, self._tls = connections, tls
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> StreamClient:
        connector = aiohttp.TCPConnector(limit=self._connections, ssl=self._tls or True)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout())
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    async def stream(
        self,
        url: str,
        content: bytes,
        *,
        api_key: str | None,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
        api: Api = "chat",
    ) -> tuple[StreamResult, list[int]]:
        """POST ``content`` (a streaming request of ``api``) and time it; never raises for
        faults.

        Returns the result, as :func:`~ttftscope.client.stream.stream_completion` would
        give it, and the arrival times of the chunks that carried content. The stream's
        events are read by ``api``'s rules. ``timeout_s`` bounds connecting and each gap
        between reads.
        """
        assert self._session is not None, "use StreamClient in `async with`"
        secrets = [api_key, *header_secrets(headers)]
        run = StreamRun(url=url, api=api, secrets=secrets, request_bytes=len(content))
        sent_headers = request_headers(api_key, {**api_headers(api, api_key), **(headers or {})})
        stamps: list[int] = []
        limits = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        run.start()
        try:
            resp = await self._session.post(
                url,
                data=content,
                headers=sent_headers,
                timeout=limits,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as exc:
            run.failure = classify_transport(aiohttp_fault(exc), url, timeout_s)
            return run.result(), stamps
        await _respond(resp, run, stamps, timeout_s)
        return run.result(), stamps


async def _respond(
    resp: aiohttp.ClientResponse, run: StreamRun, stamps: list[int], timeout_s: float
) -> None:
    try:
        run.stamp("headers")
        run.status = resp.status
        await _read(resp, run, stamps)
    except (aiohttp.ClientError, OSError) as exc:
        fault = aiohttp_fault(exc)
        run.failure = classify_transport(fault, run.url, timeout_s, mid_stream_events=run.events)
    finally:
        if resp.content.at_eof():
            resp.release()  # read to the end: the connection goes back to the pool
        else:
            resp.close()  # left early: close it, so the server aborts the request


async def _read(resp: aiohttp.ClientResponse, run: StreamRun, stamps: list[int]) -> None:
    ctype = resp.headers.get("content-type", "")
    if resp.status != 200:
        body = await _read_capped(resp)
        run.failure = classify_status(resp.status, resp.headers, body, run.url)
    elif "text/event-stream" not in ctype:
        run.failure = not_an_api(ctype, await _read_capped(resp), run.url)
    else:
        decoder = SSEDecoder()
        async for chunk in resp.content.iter_any():
            if carries_content(chunk, run.api):
                stamps.append(time.perf_counter_ns())
            if chunk and not fold_chunk(decoder, chunk, run):
                return
        fold_end(decoder, run)


async def _read_capped(resp: aiohttp.ClientResponse) -> bytes:
    buf = bytearray()
    async for chunk in resp.content.iter_any():
        buf += chunk
        if len(buf) >= _BODY_CAP:
            break
    return bytes(buf[:_BODY_CAP])
