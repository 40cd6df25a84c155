"""The local server's record (what runs where), kept in a state file other processes read,
and whether a run against a URL reads that server's spans (:func:`trace_port_for`).

Below the capabilities, so ``localserver`` (which writes the record), ``cli`` (probe and bench)
and ``sdkinstrument`` (``instrument`` inside an application) decide alike.

>>> from ttftscope.config.schema import Settings
>>> trace_port_for(Settings.model_validate({"observability": {"read_traces": "off"}}), "http://h")
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ttftscope.assets import cache_dir
from ttftscope.config.schema import Settings, root_url

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class LocalServer:
    """A running local vLLM server.

    >>> LocalServer("http://127.0.0.1:8000/v1", 8000, 1, "ttftscope-tiny", "/l").root_url
    'http://127.0.0.1:8000'
    """

    base_url: str
    port: int
    pid: int
    model: str
    log_path: str
    started_at: float = 0.0
    trace_port: int = 0  # the 127.0.0.1 port its spans are exported to (0: not traced)
    # vLLM's flags beyond the fixed command, as started (None: a state file of an older
    # ttftscope, which did not record them)
    args: tuple[str, ...] | None = None

    @property
    def root_url(self) -> str:
        """Server root without ``/v1`` (for ``/health``, ``/metrics``, ``/tokenize``)."""
        return root_url(self.base_url)


def state_dir() -> Path:
    """Folder for the state file, lock and server log."""
    path = cache_dir() / "localserver"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path() -> Path:
    """The JSON state file describing the running server, if any."""
    return state_dir() / "state.json"


def write_state(server: LocalServer, path: Path | None = None) -> None:
    """Atomically record ``server`` in the state file.

    >>> server = LocalServer("u", 1, 2, "m", "l", trace_port=9, args=("--x", "1"))
    >>> write_state(server, result_dir / "state.json")
    >>> back = read_state(result_dir / "state.json")
    >>> back == server, back.args if back else None
    (True, ('--x', '1'))
    """
    path = path or state_path()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(asdict(server), indent=2), encoding="utf-8")
    tmp.replace(path)


def read_state(path: Path | None = None) -> LocalServer | None:
    """The server recorded in the state file, or None when absent or unreadable.

    >>> read_state(Path("/nonexistent/state.json")) is None
    True
    """
    path = path or state_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        fields = {k: data[k] for k in LocalServer.__dataclass_fields__ if k in data}
        args = fields.pop("args", None)
        if args is not None and not (
            isinstance(args, list) and all(isinstance(a, str) for a in args)
        ):
            return None
        return LocalServer(**fields, args=None if args is None else tuple(args))
    except (OSError, ValueError, TypeError):
        return None


def trace_port_for(settings: Settings, base_url: str) -> int | None:
    """The 127.0.0.1 port to receive vLLM's spans on for a run against ``base_url``, or None.

    ``[observability] read_traces`` ``"auto"`` (the default) receives when the target is the
    local server and that server was started exporting its spans (``local-server start``
    records the port); ``"on"`` always, on ``trace_receiver_port`` (a vLLM started with
    ``--otlp-traces-endpoint http://127.0.0.1:PORT/v1/traces``); ``"off"`` never. Without the
    ``trace`` extra there is no receiver. Probe, bench and ``instrument`` all decide here.
    """
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
