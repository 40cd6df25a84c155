"""Stopping what an e2e test started in a session of its own (``start_new_session=True``)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM ``proc``'s process group (a server and the workers it started), SIGKILL it
    after ``grace_s``; nothing if its leader has already exited."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
