"""A ``/metrics`` stand-in for bench tests: serves Prometheus text the test edits live.

Starts on 127.0.0.1 (port chosen by the OS) in a daemon thread, like
:class:`tests.faultserver.FaultServer`; ``text`` is what ``GET /metrics`` answers now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route


class MetricsServer:
    """Context manager serving ``self.text`` at ``/metrics``; counts the scrapes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.scrapes = 0
        self.lock = threading.Lock()
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def edit(self, change: Callable[[str], str]) -> None:
        """Replace the served text by ``change(text)`` (between two scrapes)."""
        with self.lock:
            self.text = change(self.text)

    def _app(self) -> Starlette:
        async def metrics(request: Request) -> Response:
            with self.lock:
                self.scrapes += 1
                return PlainTextResponse(self.text, media_type="text/plain; version=0.0.4")

        return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])

    def __enter__(self) -> MetricsServer:
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=0, log_level="critical", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("metrics stand-in did not start")
            time.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(timeout=5)
