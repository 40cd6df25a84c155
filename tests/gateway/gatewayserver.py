"""The gateway on a background thread, as the tests use it (the library's own runner)."""

from __future__ import annotations

from ttftscope.gateway.serve import BackgroundGateway as GatewayServer

__all__ = ["GatewayServer"]
