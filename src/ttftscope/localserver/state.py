"""The local server's record: what runs where, kept in a state file other processes read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ttftscope.assets import cache_dir
from ttftscope.config.schema import root_url


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

    >>> write_state(LocalServer("u", 1, 2, "m", "l"), Path("/tmp/s.json"))  # doctest: +SKIP
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
