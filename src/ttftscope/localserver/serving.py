"""The flags the local vLLM serves with by default, and whether a running one has them.

One definition for ``ttftscope local-server start``, the demo and the e2e tests' fixture, so
the server the README starts is the server the tests exercise: tool calling as coding agents
use it (``tool_choice`` "auto", vLLM's default when a request carries tools, needs a tool
parser; the tiny model's template writes Hermes-style ``<tool_call>`` tags) and its
per-request spans exported to the trace receiver (:mod:`.traces`).

>>> default_args(14318)[:3]
['--enable-auto-tool-choice', '--tool-call-parser', 'hermes']
>>> default_args(0) == list(TOOL_ARGS)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ttftscope.errors import LocalServerError
from ttftscope.localserver.traces import trace_args
from ttftscope.localstate import LocalServer

TOOL_ARGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")


def default_args(trace_port: int) -> list[str]:
    """vLLM's flags beyond the fixed command: tool calling, spans to ``trace_port`` (0: none)."""
    return [*TOOL_ARGS, *trace_args(trace_port)]


def started_args(server: LocalServer) -> tuple[str, ...] | None:
    """The flags ``server`` was started with beyond the fixed command: its state's, else (a
    state an older ttftscope wrote) its process's command line after ``--max-model-len N``,
    where the fixed command ends; None when neither says.

    >>> started_args(LocalServer("u", 1, 2**22 + 7, "m", "/l", args=("--a",)))
    ('--a',)
    >>> started_args(LocalServer("u", 1, 2**22 + 7, "m", "/l")) is None  # no such process
    True
    """
    if server.args is not None:
        return server.args
    try:
        argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None
    parts = argv.split("\0")[:-1]
    if _LAST_FIXED not in parts:
        return None
    return tuple(parts[parts.index(_LAST_FIXED) + 2 :])


_LAST_FIXED = "--max-model-len"  # the last flag of process.server_command's fixed part


def check_same_args(server: LocalServer, wanted: Sequence[str]) -> None:
    """Raise unless ``server`` was started with exactly the flags ``wanted``.

    >>> srv = LocalServer("http://127.0.0.1:8000/v1", 8000, 1, "m", "/l", args=("--a",))
    >>> check_same_args(srv, ["--a"])
    >>> check_same_args(srv, ["--b"])
    Traceback (most recent call last):
    ...
    ttftscope.LocalServerError: a local vLLM already runs on port 8000 (pid 1) with other ...
    """
    args = started_args(server)
    if args is not None and args == tuple(wanted):
        return
    had = "flags unknown" if args is None else " ".join(args) or "no flags"
    raise LocalServerError(
        f"a local vLLM already runs on port {server.port} (pid {server.pid}) with other flags "
        f"({had}) than wanted ({' '.join(wanted) or 'no flags'})",
        hint="stop it (`ttftscope local-server stop`) and run again; a server started by "
        "`ttftscope local-server start` without extra flags has the wanted ones",
    )
