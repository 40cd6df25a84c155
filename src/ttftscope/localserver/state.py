"""Where the local server runs: the port it starts on (:func:`choose_port`) and its record.

The record (what runs where) is kept in a state file that later calls and other processes read,
so a server that had to start on another port than 8000 is still found.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from ttftscope.assets import cache_dir
from ttftscope.config.schema import root_url
from ttftscope.errors import LocalServerError
from ttftscope.localserver.progress import Progress

HOST = "127.0.0.1"
DEFAULT_PORT = 8000  # the port every command's default base URL points at


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

    >>> write_state(LocalServer("u", 1, 2, "m", "l"), result_dir / "state.json")
    >>> read_state(result_dir / "state.json")
    LocalServer(base_url='u', port=1, pid=2, model='m', log_path='l', started_at=0.0, trace_port=0)
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
        return LocalServer(**{k: data[k] for k in LocalServer.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError):
        return None


def pick_free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that was free a moment ago (the kernel's choice).

    >>> 1024 <= pick_free_port() <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when a server could bind ``host:port`` now (nothing listens there).

    SO_REUSEADDR is set as vLLM sets it, so connections of a just-stopped server lingering in
    TIME_WAIT do not count as taken; a listening socket does.

    >>> port_is_free(pick_free_port())
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(port: int | None, say: Progress, host: str = HOST) -> int:
    """The port to start on: ``port``, else :data:`DEFAULT_PORT`, else one the kernel picks.

    An explicit ``port`` that is taken is an error naming it. A taken default is replaced by a
    free port, and ``say`` is told so in one line.

    >>> port = pick_free_port()
    >>> choose_port(port, print) == port
    True
    """
    if port is not None:
        if not port_is_free(port, host):
            raise LocalServerError(
                f"port {port} on {host} is already in use by another program, so the local "
                "vLLM server cannot start there",
                hint=f"pass another --port, or stop what holds port {port} "
                f"(`ss -ltnp 'sport = :{port}'` shows it)",
            )
        return port
    if port_is_free(DEFAULT_PORT, host):
        return DEFAULT_PORT
    chosen = pick_free_port(host)
    say(
        f"port {DEFAULT_PORT} is taken by another program; starting on {host}:{chosen} "
        "instead (commands find it through the local server's state file)"
    )
    return chosen
