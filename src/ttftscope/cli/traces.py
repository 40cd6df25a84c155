"""Whether a probe or bench runs the trace receiver, and on which port.

``[observability] read_traces``: ``"auto"`` (the default) runs it when the target is the local
server and that server was started exporting its spans (``local-server start`` records the
port); ``"on"`` always, on ``trace_receiver_port`` (a vLLM you started yourself with
``--otlp-traces-endpoint http://127.0.0.1:PORT/v1/traces``); ``"off"`` never. Without the
``trace`` extra there is no receiver.

>>> from ttftscope.config.schema import Settings
>>> trace_port_for(Settings.model_validate({"observability": {"read_traces": "off"}}), "http://h")
"""

from __future__ import annotations

import importlib.util
from urllib.parse import urlsplit

from ttftscope.config.schema import Settings
from ttftscope.localserver.state import LocalServer, read_state

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def trace_port_for(settings: Settings, base_url: str) -> int | None:
    """The 127.0.0.1 port to receive vLLM's spans on for a run against ``base_url``, or None."""
    obs = settings.observability
    if obs.read_traces == "off" or not _extra_installed():
        return None
    if obs.read_traces == "on":
        return obs.trace_receiver_port or None
    server = read_state()
    if server is None or not server.trace_port or not is_local_server(server, base_url):
        return None
    return server.trace_port


def is_local_server(server: LocalServer, base_url: str) -> bool:
    """Whether ``base_url`` points at ``server`` (any loopback name for its host).

    >>> srv = LocalServer("http://127.0.0.1:8000/v1", 8000, 1, "m", "/l")
    >>> is_local_server(srv, "http://localhost:8000/v1"), is_local_server(srv, "http://h:8000")
    (True, False)
    """
    try:
        target = urlsplit(base_url)
        port = target.port
    except ValueError:
        return False
    return target.hostname in _LOOPBACK and port == server.port


def _extra_installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.proto") is not None
    except ModuleNotFoundError:  # no opentelemetry at all
        return False
