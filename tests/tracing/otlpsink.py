"""A local OTLP/HTTP sink for tests: keeps every POST (path, headers, spans) it receives."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class Export:
    path: str
    headers: dict[str, str]
    request: Any  # ExportTraceServiceRequest

    def spans(self) -> list[tuple[str, Any]]:
        """(service name, span) of every span in this export."""
        out = []
        for rs in self.request.resource_spans:
            attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                out += [(attrs.get("service.name", ""), span) for span in ss.spans]
        return out


@dataclass
class OtlpSink:
    """``with OtlpSink() as sink``: ``sink.url`` takes OTLP/HTTP; ``sink.exports`` holds it."""

    exports: list[Export] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)  # statuses to answer first, then 200
    refused: int = 0  # how many POSTs got one of those
    arrived: threading.Event = field(default_factory=threading.Event)  # set at each export

    def __enter__(self) -> OtlpSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if sink.answers:
                    sink.refused += 1
                    self.send_response(sink.answers.pop(0))
                    self.send_header("retry-after", "0")  # at once: the test waits for nothing
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                headers = {k.lower(): v for k, v in self.headers.items()}
                sink.exports.append(Export(self.path, headers, req))
                sink.arrived.set()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def spans(self) -> list[tuple[str, Any]]:
        return [s for e in self.exports for s in e.spans()]

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
