"""Run the gateway: in the foreground (the CLI) or on a background thread (demo, tests).

>>> with BackgroundGateway(GatewaySettings()) as gw:  # doctest: +SKIP
...     gw.base_url
'http://127.0.0.1:41234/v1'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from types import TracebackType

import uvicorn

from ttftscope.config.schema import GatewaySettings
from ttftscope.errors import TtftscopeError
from ttftscope.gateway.app import Gateway, create_app


def serve(settings: GatewaySettings) -> None:
    """Serve until interrupted (uvloop + httptools: the fastest hop Python offers)."""
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        loop="uvloop",
        http="httptools",
        access_log=False,
    )


class BackgroundGateway:
    """A running gateway on 127.0.0.1 (a free port unless ``port``); stopped on exit."""

    def __init__(
        self, settings: GatewaySettings, env: Mapping[str, str] | None = None, port: int = 0
    ) -> None:
        self.app = create_app(settings, env=env)
        self._config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
            access_log=False,
        )
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self.port = port

    @property
    def gateway(self) -> Gateway:
        gw: Gateway = self.app.state.gateway
        return gw

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> BackgroundGateway:
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 120  # start-up probes every upstream once
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise TtftscopeError(
                    "the gateway did not start",
                    hint="see the log lines above for the upstream that failed",
                )
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
