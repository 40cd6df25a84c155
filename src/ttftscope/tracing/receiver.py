"""A small OTLP/HTTP trace receiver on 127.0.0.1, filling a :class:`SpanStore`.

``POST /v1/traces`` with an OTLP trace export (protobuf or JSON, optionally gzip) answers an
empty ``ExportTraceServiceResponse`` in the request's encoding; a body that cannot be read
gets 400, an encoding OTLP/HTTP does not define 415, another path 404. The standard
library's threading HTTP server runs it on a background thread, so it works with only the
``trace`` extra installed (no gateway extra), and stops when the ``with`` block ends.

>>> with TraceReceiver() as rx:
...     rx.endpoint.startswith("http://127.0.0.1:") and rx.endpoint.endswith("/v1/traces")
True
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self

from ttftscope.errors import TtftscopeError
from ttftscope.tracing.otlpdecode import JSON, PROTOBUF, OtlpError, decode_export
from ttftscope.tracing.store import DEFAULT_MAX_TRACES, SpanStore

log = logging.getLogger("ttftscope.tracing")

HOST = "127.0.0.1"
PATH = "/v1/traces"
# exporters batch; vLLM's default batch is 512 spans of a few hundred bytes each
MAX_BODY_BYTES = 16 * 1024 * 1024


class TraceReceiver:
    """Receive OTLP/HTTP trace exports on ``HOST:port`` (0: the OS picks) into ``store``."""

    def __init__(
        self, port: int = 0, *, store: SpanStore | None = None, max_traces: int = DEFAULT_MAX_TRACES
    ) -> None:
        self.port = port
        self.store = store if store is not None else SpanStore(max_traces)
        self.rejected = 0  # exports answered 4xx
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The URL exporters post to (``--otlp-traces-endpoint``)."""
        return f"http://{HOST}:{self.port}{PATH}"

    def start(self) -> Self:
        """Listen and serve on a background thread; an error when the port is taken."""
        try:
            server = ThreadingHTTPServer((HOST, self.port), _handler(self))
        except OSError as exc:
            taken = exc.errno == errno.EADDRINUSE
            raise TtftscopeError(
                f"the trace receiver cannot listen on {HOST}:{self.port}: {exc.strerror}",
                hint="another ttftscope run (or a collector) holds that port: wait for it, "
                "or set [observability] trace_receiver_port to a free port"
                if taken
                else "pick another [observability] trace_receiver_port",
            ) from None
        server.daemon_threads = True
        self._server = server
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="trace-receiver"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        # An exporter keeps its connection open; left open, a thread of this receiver would
        # go on answering its exports into a store nobody reads, even after another receiver
        # took the port. Closed, the exporter reconnects to whoever listens next.
        with self._lock:
            open_connections = list(self._connections)
        for conn in open_connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def receiving(port: int | None) -> Iterator[SpanStore | None]:
    """A receiver on ``127.0.0.1:port`` for the block, and its store; None without a port,
    and None (with a warning) when the port is taken: another run (a second ``--shard``, a
    probe beside a bench, an instrumented app) reads the spans there, and this run goes on
    with the ``/metrics`` histograms instead of stopping.

    >>> with receiving(None) as store:
    ...     store is None
    True
    """
    if port is None:
        yield None
        return
    try:
        receiver = TraceReceiver(port).start()
    except TtftscopeError as exc:
        log.warning("%s (%s); server parts come from /metrics histograms", exc, exc.hint)
        yield None
        return
    try:
        yield receiver.store
    finally:
        receiver.stop()


def _response_body(media: str) -> bytes:
    # an empty ExportTraceServiceResponse (no partial_success): b"" as protobuf, {} as JSON
    return b"{}" if media == JSON else b""


def _length(header: str | None) -> int | None:
    try:
        length = int(header or "0")
    except ValueError:
        return None
    return length if length >= 0 else None


def _handler(receiver: TraceReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse their connection
        server_version = "ttftscope-trace-receiver"

        def setup(self) -> None:
            super().setup()
            with receiver._lock:
                receiver._connections.add(self.connection)

        def finish(self) -> None:
            with receiver._lock:
                receiver._connections.discard(self.connection)
            with contextlib.suppress(OSError):  # the peer (or stop()) closed it first
                super().finish()

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != PATH:
                self._answer(HTTPStatus.NOT_FOUND, b"only POST /v1/traces is served\n")
                return
            length = _length(self.headers.get("Content-Length"))
            if length is None or length > MAX_BODY_BYTES:
                self.close_connection = True  # the body is not read: the stream is lost
                status = (
                    HTTPStatus.BAD_REQUEST
                    if length is None
                    else HTTPStatus.REQUEST_ENTITY_TOO_LARGE
                )
                self._answer(status, b"Content-Length is not a size, or too large\n")
                return
            body = self.rfile.read(length)
            ctype = self.headers.get("Content-Type")
            try:
                spans = decode_export(body, ctype, self.headers.get("Content-Encoding"))
            except OtlpError as exc:
                receiver.rejected += 1
                self._answer(HTTPStatus(exc.status), (exc.message + "\n").encode())
                return
            receiver.store.add(spans)
            media = JSON if (ctype or "").lower().startswith(JSON) else PROTOBUF
            self._answer(HTTPStatus.OK, _response_body(media), media)

        def do_GET(self) -> None:
            self._answer(HTTPStatus.METHOD_NOT_ALLOWED, b"POST OTLP traces to /v1/traces\n")

        def _answer(self, status: HTTPStatus, body: bytes, ctype: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per export on stderr would drown a run's output

    return Handler
