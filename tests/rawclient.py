"""A raw HTTP/1.1 client on 127.0.0.1 that sends a whole request and reads nothing.

For tests of a client that leaves: closing the returned socket is the client going away,
at whatever moment the test chooses.
"""

from __future__ import annotations

import json
import socket
from typing import Any


def post_raw(port: int, path: str, body: dict[str, Any], *, timeout_s: float) -> socket.socket:
    """POST ``body`` as JSON to ``path`` on ``127.0.0.1:port``; the connected socket, unread."""
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    sock.sendall(head + data)
    return sock
