"""The local vLLM's processes: those this process started, whether one lives, and stopping.

vLLM runs in its own process group (its EngineCore is a child), so a stop signals the whole
group: SIGTERM, then SIGKILL after a grace period. Servers this process launched are kept in
:data:`children` so their exit status is collected (no zombies) whoever stopped them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from ttftscope.localstate import read_state, state_path

__all__ = ["STOP_GRACE_S", "children", "group_alive", "pid_alive", "reap", "stop"]

STOP_GRACE_S = 20.0
children: dict[int, subprocess.Popen[bytes]] = {}  # servers this process started, for reaping


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live vLLM process (ours, polled; another's, by its command line).

    >>> pid_alive(2**22 + 1)  # above Linux's largest pid: nothing runs there
    False
    """
    child = children.get(pid)
    if child is not None:
        return child.poll() is None  # poll() also reaps our own exited child
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = b""
    with contextlib.suppress(OSError):  # guards against pid reuse where /proc exists
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    return not cmdline or b"vllm" in cmdline  # empty while a process is still being exec'd


def group_alive(pgid: int) -> bool:
    """Whether any process is left in group ``pgid`` (our own exited leader is reaped first).

    >>> group_alive(os.getpgid(0))
    True
    """
    child = children.get(pgid)
    if child is not None:
        child.poll()  # reap our own leader, or it lingers as a zombie in the group
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(grace_s: float = STOP_GRACE_S, *, only_pid: int | None = None) -> bool:
    """Stop the recorded server: SIGTERM to its process group, SIGKILL after ``grace_s``.

    Returns False when no server was recorded or its process was already gone. With
    ``only_pid``, a recorded server with another pid (started by someone else after ours
    ended) is left alone.

    Stops the machine's local server, so not run as a test::

        stop()  # True when one was running
    """
    server = read_state()
    if server is None or (only_pid is not None and server.pid != only_pid):
        return False
    pgid = server.pid  # started with start_new_session, so the leader's pid is the group id
    was_alive = pid_alive(server.pid)
    if was_alive or _vllm_in_group(pgid):
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 5.0
            while group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.1)
    reap(pgid)
    state_path().unlink(missing_ok=True)
    return was_alive


def reap(pid: int) -> None:
    """Collect the exit status of a server this process started, once it is stopped (by us
    or by another command's ``local-server stop``), so no zombie or warning is left behind."""
    child = children.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5.0)


def _vllm_in_group(pgid: int) -> bool:
    # Orphans (e.g. EngineCore after its parent was SIGKILLed) keep the group id; look them up
    # in /proc so a stale state file never leads us to signal an unrelated, reused group.
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and b"vllm" in (stat.parent / "cmdline").read_bytes():
                return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
