"""Where the local server runs: the port it starts on (:func:`choose_port`) and its record.

The record (what runs where) is kept in a state file that later calls and other processes read,
so a server that had to start on another port than 8000 is still found; it lives in
:mod:`ttftscope.localstate` (below the capabilities, which ``instrument`` reads too).
"""

from __future__ import annotations

import socket

from ttftscope.errors import LocalServerError
from ttftscope.localserver.progress import Progress

__all__ = ["DEFAULT_PORT", "HOST", "choose_port", "pick_free_port", "port_is_free"]

HOST = "127.0.0.1"
DEFAULT_PORT = 8000  # the port every command's default base URL points at


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
