"""Run the gateway: in the foreground (the CLI) or on a background thread (demo, tests).

It probes its upstreams on start (a real vLLM in the e2e tests), so not run here::

    with BackgroundGateway(GatewaySettings()) as gw:
        gw.base_url  # 'http://127.0.0.1:41234/v1'
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

import uvicorn

from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.app import create_app
from ttftscope.gateway.runtime.heap import limit_arenas
from ttftscope.gateway.state import Gateway
from ttftscope.gateway.transport.bounds import bounded_protocol
from ttftscope.threadserver import ThreadServer
from ttftscope.tracing.emit import SpanEmitter


def serve(settings: GatewaySettings, emitter: SpanEmitter | None = None) -> None:
    """Serve until interrupted (uvloop + httptools: the fastest hop Python offers).

    The gateway's own log (each upstream's version, models and how ids reach it, pass-through
    and mismatch warnings) goes to stderr from INFO up; it holds no keys and no prompt text.
    Two malloc arenas (:mod:`~ttftscope.gateway.runtime.heap`): RSS stays near the session cache.
    With an ``emitter`` every request is traced.
    Connections keep the bounds of :mod:`~ttftscope.gateway.transport.bounds` (sizes, timeouts).
    """
    limit_arenas(2)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    log = logging.getLogger("ttftscope.gateway")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    uvicorn.run(
        create_app(settings, emitter=emitter),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        loop="uvloop",
        http=bounded_protocol(settings),
        access_log=False,
    )


class BackgroundGateway(ThreadServer):
    """A running gateway on 127.0.0.1 (a free port unless ``port``); stopped on exit."""

    def __init__(
        self,
        settings: GatewaySettings,
        env: Mapping[str, str] | None = None,
        port: int = 0,
        emitter: SpanEmitter | None = None,
    ) -> None:
        self.app = create_app(settings, env=env, emitter=emitter)
        super().__init__(
            self.app,
            name="gateway",
            port=port,
            lifespan="on",
            log_level="warning",
            start_timeout_s=120,  # start-up probes every upstream once
            graceful_s=2,
            hint="see the log lines above for the upstream that failed",
            http=bounded_protocol(settings),  # the limits serve() keeps
        )

    @property
    def gateway(self) -> Gateway:
        return self.app.gateway

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"
