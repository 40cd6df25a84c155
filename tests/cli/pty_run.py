"""Run a command under a pseudo-terminal of a given size, as a person's terminal would."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios


def run_in_pty(cmd: list[str], *, columns: int, env: dict[str, str], timeout: float = 120) -> str:
    """Everything ``cmd`` wrote to its terminal (stdout and stderr), once it exited."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "40"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=timeout)
    return b"".join(chunks).decode("utf-8", "replace")
