"""A stand-in for the real vLLM server in the local server's unit tests.

:func:`use_fake` makes :mod:`ttftscope.localserver.process` start a small Python HTTP server
(answering ``/health``, with one child process, like vLLM's EngineCore) instead of vLLM, and
skips the install and the model build. Its command line contains "vllm" because the manager
checks that before it signals a recorded pid.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from ttftscope.localserver import process as ls

FAKE_SERVER = r"""
import http.server, subprocess, sys, time
port, delay, mode = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if mode == "die":
    print("fatal: fake engine failed to start", flush=True)
    sys.exit(3)
if mode == "stubborn":
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "vllm-child"])
time.sleep(delay)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def use_fake(monkeypatch: pytest.MonkeyPatch, mode: str = "ok", delay: float = 0.3) -> None:
    """Replace vLLM (and its install and model) by the stand-in for this test."""

    def command(python: Path, model: Path, port: int, extra: Sequence[str] = ()) -> list[str]:
        return [sys.executable, "-c", FAKE_SERVER, str(port), str(delay), mode, "vllm-fake"]

    monkeypatch.setattr(ls, "ensure_vllm_venv", lambda progress=None: Path("/no/venv"))
    monkeypatch.setattr(ls, "ensure_tiny_model", lambda venv=None, progress=None: Path("/m"))
    monkeypatch.setattr(ls, "server_command", command)


@contextmanager
def holding(port: int) -> Iterator[socket.socket | None]:
    """Listen on ``127.0.0.1:port`` for the block; None when something else already holds it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are no owner
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        yield None  # taken already: the port is just as unavailable to the code under test
        return
    with sock:
        sock.listen(1)
        yield sock
