"""POST an OTLP/HTTP protobuf body, configured by the ``OTEL_EXPORTER_OTLP_*`` variables.

What the SDK's OTLP/HTTP exporter reads, read the same way (the traces variable first, then
the general one): headers (``k=v`` pairs, comma-separated, URL-encoded), timeout in seconds
(default 10), compression (``gzip``, ``deflate`` or none), the CA certificate and the client
certificate and key for TLS. Like the SDK it retries 429, 502, 503 and 504 with exponential
backoff (or the ``Retry-After`` the collector sent) within the timeout, and a broken
keep-alive connection once at once. Runs on the exporting thread only, over one kept
connection (stdlib ``http.client``; no HTTP proxy is used, as for a local collector).

>>> cfg = SendConfig.from_env("http://c:4318/v1/traces",
...                           {"OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,x=1"})
>>> cfg.headers["api-key"], cfg.timeout_s, cfg.compression
('a b', 10.0, 'none')
"""

from __future__ import annotations

import gzip
import http.client
import logging
import random
import ssl
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

__all__ = ["OtlpSender", "SendConfig"]

_log = logging.getLogger(__name__)
_RETRYABLE = frozenset({429, 502, 503, 504})
_MAX_RETRIES = 6


def _env(environ: Mapping[str, str], name: str) -> str:
    """``OTEL_EXPORTER_OTLP_TRACES_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``, else ''."""
    traces = environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}", "").strip()
    return traces or environ.get(f"OTEL_EXPORTER_OTLP_{name}", "").strip()


def parse_headers(value: str) -> dict[str, str]:
    """``k=v,k2=v2`` (W3C baggage form, URL-encoded) as lowercase names; bad pairs skipped.

    >>> parse_headers("A=1, b = x%3Dy ,bad")
    {'a': '1', 'b': 'x=y'}
    """
    out: dict[str, str] = {}
    for pair in value.split(","):
        name, sep, val = pair.partition("=")
        if sep and name.strip():
            out[unquote(name).strip().lower()] = unquote(val).strip()
    return out


@dataclass(frozen=True)
class SendConfig:
    """Where and how export bodies go."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    compression: str = "none"  # none | gzip | deflate
    certificate: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None

    @classmethod
    def from_env(cls, url: str, environ: Mapping[str, str]) -> SendConfig:
        try:
            timeout = float(_env(environ, "TIMEOUT") or 10.0)
        except ValueError:
            timeout = 10.0
        compression = _env(environ, "COMPRESSION").lower() or "none"
        return cls(
            url=url,
            headers=parse_headers(_env(environ, "HEADERS")),
            timeout_s=timeout,
            compression=compression if compression in ("gzip", "deflate") else "none",
            certificate=_env(environ, "CERTIFICATE") or None,
            client_certificate=_env(environ, "CLIENT_CERTIFICATE") or None,
            client_key=_env(environ, "CLIENT_KEY") or None,
        )


class OtlpSender:
    """Sends export bodies to one OTLP/HTTP endpoint over a kept connection."""

    def __init__(self, config: SendConfig) -> None:
        self.config = config
        parts = urlsplit(config.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"content-type": "application/x-protobuf", **config.headers}
        if config.compression != "none":
            self._headers.setdefault("content-encoding", config.compression)
        self._conn: http.client.HTTPConnection | None = None
        self.stopping = threading.Event()  # set: no more waiting between retries

    def send(self, body: bytes) -> bool:
        """POST ``body``; whether the collector took it (2xx/3xx) within the timeout."""
        data = _compress(body, self.config.compression)
        deadline = time.monotonic() + self.config.timeout_s
        for retry in range(_MAX_RETRIES):
            status, retry_after = self._post(data, deadline)
            if status is not None and 200 <= status < 400:
                return True
            if status is not None and status not in _RETRYABLE:
                _log.error("OTLP export to %s answered %s; spans dropped", self._host, status)
                return False
            wait = retry_after if retry_after is not None else 2**retry * random.uniform(0.8, 1.2)
            if time.monotonic() + wait > deadline or self.stopping.wait(wait):
                break
        _log.error(
            "OTLP export to %s failed within %ss; spans dropped", self._host, self.config.timeout_s
        )
        return False

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(self, data: bytes, deadline: float) -> tuple[int | None, float | None]:
        """One POST (and one at once more on a broken kept connection): status, Retry-After."""
        for attempt in range(2):
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None
            try:
                conn = self._connection(left)
                conn.request("POST", self._path, body=data, headers=self._headers)
                resp = conn.getresponse()
                resp.read()
                return resp.status, _retry_after(resp.getheader("retry-after"))
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt:
                    _log.warning("OTLP export to %s: %s", self._host, exc)
        return None, None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=self._tls()
                )
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        self._conn.timeout = timeout
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        return self._conn

    def _tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.config.certificate)
        if self.config.client_certificate and self.config.client_key:
            ctx.load_cert_chain(self.config.client_certificate, self.config.client_key)
        return ctx


def _compress(body: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(body)
    if how == "deflate":
        return zlib.compress(body)
    return body


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None
