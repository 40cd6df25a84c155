"""Scrape a Prometheus ``/metrics`` endpoint over HTTP into a :class:`MetricsSnapshot`.

The body is read as a stream and refused past 64 MiB (a misdirected URL can point at an
endless or huge answer), and decoded as UTF-8 — the text format's only encoding, whatever
the Content-Type says — with invalid bytes replaced (U+FFFD) and a note on the snapshot.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from urllib.parse import urlsplit, urlunsplit

import httpx

from ttftscope.errors import MetricsError, TransportFailure
from ttftscope.httpx_failure import httpx_failure
from ttftscope.metrics.exposition import MAX_TEXT_CHARS
from ttftscope.metrics.prom import MetricsSnapshot, parse_metrics

MAX_BODY_BYTES = MAX_TEXT_CHARS  # UTF-8: never fewer bytes than characters

_ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"


def safe_url(url: str) -> str:
    """The URL without user info or query string, safe to show in messages.

    >>> safe_url("http://u:secret@h:8000/metrics?key=abc")
    'http://h:8000/metrics'
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<unparsable URL>"


def _check_response(url: str, resp: httpx.Response) -> None:
    shown = safe_url(url)
    if resp.status_code == 404:
        raise MetricsError(
            f"{shown} answered 404 Not Found",
            hint="this server exposes no /metrics; set api.metrics_url",
        )
    if resp.status_code in (401, 403):
        raise MetricsError(
            f"{shown} answered {resp.status_code}: the metrics endpoint wants credentials",
            hint="pass the API key header to the scrape too",
        )
    if resp.status_code >= 400:
        raise MetricsError(
            f"{shown} answered HTTP {resp.status_code}",
            hint="check that api.metrics_url points at a healthy server",
        )
    if "text/html" in resp.headers.get("content-type", ""):
        raise MetricsError(
            f"{shown} answered an HTML page, not Prometheus metrics",
            hint="set api.metrics_url to the server's /metrics endpoint",
        )


_UNREACHABLE = frozenset(
    {TransportFailure.REFUSED, TransportFailure.DNS, TransportFailure.TLS, TransportFailure.CONNECT}
)


def transport_error(
    url: str, exc: httpx.HTTPError | httpx.InvalidURL, timeout: float
) -> MetricsError:
    """A failed GET of ``url`` as a :class:`MetricsError`; below HTTP, ``transport`` names the
    failure as every HTTP client here does (:func:`ttftscope.httpx_failure.httpx_failure`).

    >>> err = transport_error("http://h/metrics", httpx.ConnectTimeout("timed out"), 2)
    >>> err.message, err.transport
    ('http://h/metrics gave no metrics within 2 s', <TransportFailure.TIMEOUT: 'timeout'>)
    """
    shown = safe_url(url)
    if isinstance(exc, httpx.InvalidURL):
        return MetricsError(
            f"the metrics URL {shown} is not a valid URL",
            hint="set api.metrics_url to something like http://host:8000/metrics",
        )
    # redirects, bad encodings: the exchange itself worked
    failure = httpx_failure(exc) if isinstance(exc, httpx.TransportError) else None
    if failure is TransportFailure.TIMEOUT:
        err = MetricsError(
            f"{shown} gave no metrics within {timeout:g} s",
            hint="the server may be overloaded; raise the timeout or retry",
        )
    elif failure in _UNREACHABLE:
        err = MetricsError(
            f"cannot reach the metrics endpoint {shown} ({failure}: {type(exc).__name__})",
            hint="check the server is running and api.metrics_url is right",
        )
    else:
        err = MetricsError(
            f"scraping {shown} failed: "
            + (f"{failure} ({type(exc).__name__})" if failure else type(exc).__name__),
            hint="check that api.metrics_url points at a running server",
        )
    err.transport = failure
    return err


def _headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    return {"accept": _ACCEPT, **(headers or {})}


def decode_body(data: bytes) -> tuple[str, str | None]:
    """The body as text (UTF-8, bad bytes replaced), and a note when some were bad.

    >>> decode_body("vllm:x 1\\n".encode())
    ('vllm:x 1\\n', None)
    >>> text, note = decode_body(b"x 1\\n# \\xff\\n")
    >>> text == "x 1\\n# \\ufffd\\n", note.split(":")[0]
    (True, 'the body is not valid UTF-8 (byte 6 of 8)')
    """
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        note = (
            f"the body is not valid UTF-8 (byte {exc.start} of {len(data)}): bad bytes "
            "were replaced with U+FFFD; the server or a proxy mangles its /metrics"
        )
        return data.decode("utf-8", errors="replace"), note


class _Body:
    """Collects a streamed body; MetricsError once it passes the cap or the time limit."""

    def __init__(self, url: str, timeout: float, start_ns: int) -> None:
        self.url, self.timeout, self.start_ns = url, timeout, start_ns
        self.chunks: list[bytes] = []
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > MAX_BODY_BYTES:
            raise MetricsError(
                f"{safe_url(self.url)} sent more than {MAX_BODY_BYTES // 2**20} MiB of metrics",
                hint="no inference server writes that much: check api.metrics_url (is it a "
                "federation or aggregator endpoint, or a file download?)",
            )
        if time.monotonic_ns() - self.start_ns > self.timeout * 2e9:
            # A server that drips bytes never trips the per-read timeout.
            raise MetricsError(
                f"{safe_url(self.url)} was still sending its metrics after {2 * self.timeout:g} s",
                hint="the server may be overloaded; raise the timeout or retry",
            )
        self.chunks.append(chunk)

    def collect(self, chunks: Iterator[bytes]) -> bytes:
        for chunk in chunks:
            self.add(chunk)
        return b"".join(self.chunks)

    async def acollect(self, chunks: AsyncIterator[bytes]) -> bytes:
        async for chunk in chunks:
            self.add(chunk)
        return b"".join(self.chunks)


def scrape_metrics(
    url: str,
    *,
    client: httpx.Client | None = None,
    timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
) -> MetricsSnapshot:
    """GET ``url`` and parse it; raise :class:`MetricsError` saying what to fix.

    >>> from ttftscope import scrape_metrics
    >>> snap = scrape_metrics(metrics_url)  # e.g. "http://127.0.0.1:8000/metrics"
    >>> snap.has("vllm:num_requests_running"), snap.value("vllm:prefix_cache_hits_total")
    (True, 568064.0)
    """
    own = client is None
    http = httpx.Client(timeout=timeout) if client is None else client
    start = time.monotonic_ns()
    try:
        with http.stream(
            "GET", url, headers=_headers(headers), timeout=timeout, follow_redirects=True
        ) as resp:
            _check_response(url, resp)
            body = _Body(url, timeout, start).collect(resp.iter_bytes())
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise transport_error(url, exc, timeout) from None
    finally:
        if own:
            http.close()
    return _finish(url, body, start)


async def ascrape_metrics(
    url: str,
    *,
    client: httpx.AsyncClient | None = None,
    timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
) -> MetricsSnapshot:
    """Async twin of :func:`scrape_metrics`.

    >>> import asyncio
    >>> from ttftscope import ascrape_metrics
    >>> asyncio.run(ascrape_metrics(metrics_url)).value("vllm:num_requests_waiting")
    0.0
    """
    own = client is None
    http = httpx.AsyncClient(timeout=timeout) if client is None else client
    start = time.monotonic_ns()
    try:
        async with http.stream(
            "GET", url, headers=_headers(headers), timeout=timeout, follow_redirects=True
        ) as resp:
            _check_response(url, resp)
            body = await _Body(url, timeout, start).acollect(resp.aiter_bytes())
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise transport_error(url, exc, timeout) from None
    finally:
        if own:
            await http.aclose()
    return _finish(url, body, start)


def _finish(url: str, body: bytes, start_ns: int) -> MetricsSnapshot:
    taken = time.monotonic_ns()
    text, note = decode_body(body)
    try:
        snap = parse_metrics(text, source=safe_url(url), taken_ns=taken)
    except MetricsError as exc:
        if note is None:
            raise
        raise MetricsError(f"{exc.message}; {note}", hint=exc.hint) from None
    return dataclasses.replace(
        snap,
        scrape_s=(taken - start_ns) / 1e9,
        notes=snap.notes if note is None else (note, *snap.notes),
    )
