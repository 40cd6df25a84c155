"""A ``/metrics`` stand-in for bench tests: serves Prometheus text the test edits live.

Starts on 127.0.0.1 (port chosen by the OS) in a daemon thread, like
:class:`tests.faultserver.FaultServer`; ``text`` is what ``GET /metrics`` answers now.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ttftscope.threadserver import ThreadServer


class MetricsServer(ThreadServer):
    """Context manager serving ``self.text`` at ``/metrics``; counts the scrapes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.scrapes = 0
        self.lock = threading.Lock()
        super().__init__(self._app(), name="metrics stand-in")

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
