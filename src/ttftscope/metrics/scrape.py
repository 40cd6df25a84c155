"""Scrape a Prometheus ``/metrics`` endpoint over HTTP into a :class:`MetricsSnapshot`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import httpx

from ttftscope.errors import MetricsError
from ttftscope.metrics.prom import MetricsSnapshot, parse

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


def _transport_error(url: str, exc: httpx.HTTPError, timeout: float) -> MetricsError:
    shown = safe_url(url)
    if isinstance(exc, httpx.TimeoutException):
        return MetricsError(
            f"{shown} gave no metrics within {timeout:g} s",
            hint="the server may be overloaded; raise the timeout or retry",
        )
    if isinstance(exc, httpx.ConnectError):
        return MetricsError(
            f"cannot reach the metrics endpoint {shown} ({type(exc).__name__})",
            hint="check the server is running and api.metrics_url is right",
        )
    return MetricsError(
        f"scraping {shown} failed: {type(exc).__name__}",
        hint="check that api.metrics_url points at a running server",
    )


def _headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    return {"accept": _ACCEPT, **(headers or {})}


def scrape(
    url: str,
    *,
    client: httpx.Client | None = None,
    timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
) -> MetricsSnapshot:
    """GET ``url`` and parse it; raise :class:`MetricsError` saying what to fix.

    >>> scrape("http://127.0.0.1:8000/metrics").has("vllm:num_requests_running")  # doctest: +SKIP
    True
    """
    own = client is None
    http = httpx.Client(timeout=timeout) if client is None else client
    start = time.monotonic_ns()
    try:
        resp = http.get(url, headers=_headers(headers), timeout=timeout, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise _transport_error(url, exc, timeout) from None
    finally:
        if own:
            http.close()
    return _finish(url, resp, start)


async def ascrape(
    url: str,
    *,
    client: httpx.AsyncClient | None = None,
    timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
) -> MetricsSnapshot:
    """Async twin of :func:`scrape`.

    >>> await ascrape("http://127.0.0.1:8000/metrics")  # doctest: +SKIP
    """
    own = client is None
    http = httpx.AsyncClient(timeout=timeout) if client is None else client
    start = time.monotonic_ns()
    try:
        resp = await http.get(
            url, headers=_headers(headers), timeout=timeout, follow_redirects=True
        )
    except httpx.HTTPError as exc:
        raise _transport_error(url, exc, timeout) from None
    finally:
        if own:
            await http.aclose()
    return _finish(url, resp, start)


def _finish(url: str, resp: httpx.Response, start_ns: int) -> MetricsSnapshot:
    taken = time.monotonic_ns()
    _check_response(url, resp)
    snap = parse(resp.text, source=safe_url(url), taken_ns=taken)
    return MetricsSnapshot(
        snap.samples,
        snap.families,
        snap.sample_family,
        taken_ns=taken,
        source=snap.source,
        scrape_s=(taken - start_ns) / 1e9,
    )
