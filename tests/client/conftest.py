"""A host name that does not resolve, the resolver's own way: httpx meets a real
``socket.gaierror`` and raises its own ``ConnectError`` (no library exception built by hand)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

UNRESOLVABLE = "no-such-host.invalid"


@pytest.fixture
def unresolvable(monkeypatch: pytest.MonkeyPatch) -> str:
    """``UNRESOLVABLE`` fails to resolve as glibc says it (EAI_NONAME), with or without a
    network; every other name resolves as before."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host in (UNRESOLVABLE, UNRESOLVABLE.encode()):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return UNRESOLVABLE
