"""An ASGI app served by uvicorn on a background thread, on 127.0.0.1 (demo and tests).

The port is the OS's choice unless given; it is known once the server listens. Stopping
asks uvicorn to finish (``graceful_s`` for open connections), then forces it.

>>> async def app(scope: Any, receive: Any, send: Any) -> None: ...
>>> with ThreadServer(app, name="example") as srv:
...     srv.port > 0
True
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType
from typing import Any, Literal, Self

import uvicorn

from ttftscope.errors import TtftscopeError


class ThreadServer:
    """Serve ``app`` while the ``with`` block runs; ``port`` is where it listens.

    Test stand-ins and the background gateway subclass it: their state, this lifecycle.
    """

    def __init__(
        self,
        app: Any,
        *,
        name: str,
        port: int = 0,
        lifespan: Literal["on", "off"] = "off",
        http: Literal["h11", "httptools"] | type[asyncio.Protocol] = "httptools",
        log_level: Literal["critical", "warning"] = "critical",
        start_timeout_s: float = 10.0,
        graceful_s: int = 1,
        hint: str = "run with log_level debug to see why uvicorn stopped",
    ) -> None:
        self.name, self.port, self.hint = name, port, hint
        self.start_timeout_s = start_timeout_s
        self._config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level=log_level,
            lifespan=lifespan,
            http=http,
            timeout_graceful_shutdown=graceful_s,
            access_log=False,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        # a new uvicorn server per start: a stopped one would exit at once if run again
        self._server = uvicorn.Server(self._config)
        self._thread = threading.Thread(target=self._server.run, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise TtftscopeError(f"the {self.name} did not start", hint=self.hint)
            time.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving (idempotent); the thread is gone when this returns."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout=5)
        if self._thread.is_alive():  # a stream that will not end: drop its connections
            self._server.force_exit = True
            self._thread.join(timeout=5)
