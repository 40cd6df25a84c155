"""The local server's default serving flags, recorded in its state and checked on reuse.

A stand-in server (:mod:`tests.localserver.standin`) replaces vLLM; the flags it would have been
started with are captured where :func:`ttftscope.localserver.process.server_command` is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.e2e.conftest import SERVER_ARGS
from tests.localserver.standin import use_fake
from ttftscope import localstate
from ttftscope.cli.local import local_server
from ttftscope.config.schema import DEFAULT_TRACE_RECEIVER_PORT
from ttftscope.errors import LocalServerError
from ttftscope.localserver import process as ls
from ttftscope.localserver import state as st
from ttftscope.localserver.serving import check_same_args

# Written out by hand: what vLLM 0.32 needs for tool_choice "auto" with the tiny model's
# Hermes-style <tool_call> template, and the span export to the receiver's default port.
AGENT_FLAGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
SPAN_FLAGS = ["--otlp-traces-endpoint", "http://127.0.0.1:14318/v1/traces"]


def capture_args(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Use the stand-in and collect the extra vLLM flags of every launch."""
    use_fake(monkeypatch)
    fake = ls.server_command
    seen: list[list[str]] = []

    def command(python: Path, model: Path, port: int, extra: Sequence[str] = ()) -> list[str]:
        seen.append(list(extra))
        return fake(python, model, port, extra)

    monkeypatch.setattr(ls, "server_command", command)
    return seen


def test_cli_start_serves_tool_calling_and_spans_by_default(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = capture_args(monkeypatch)
    port = str(st.pick_free_port())
    result = CliRunner().invoke(local_server, ["start", "--port", port, "--wait-s", "20"])
    assert result.exit_code == 0, result.output
    assert seen == [AGENT_FLAGS + SPAN_FLAGS]
    recorded = localstate.read_state()
    assert recorded is not None and recorded.args == tuple(AGENT_FLAGS + SPAN_FLAGS)


def test_cli_start_passes_the_users_flags_last(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = capture_args(monkeypatch)
    port = str(st.pick_free_port())
    args = ["start", "--port", port, "--wait-s", "20", "--", "--max-num-seqs", "4"]
    result = CliRunner().invoke(local_server, args)
    assert result.exit_code == 0, result.output
    assert seen == [AGENT_FLAGS + SPAN_FLAGS + ["--max-num-seqs", "4"]]


def test_the_e2e_fixture_serves_what_local_server_start_serves() -> None:
    assert DEFAULT_TRACE_RECEIVER_PORT == 14318
    assert list(SERVER_ARGS) == AGENT_FLAGS + SPAN_FLAGS


def _start(args: Sequence[str], *, same_args: bool = False, port: int | None = None) -> ls.Started:
    return ls.ensure_started(
        port, extra_args=args, wait_s=20, progress=lambda _: None, same_args=same_args
    )


def test_same_args_refuses_a_server_started_with_other_flags(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = capture_args(monkeypatch)
    first = _start(["--a", "1"], port=st.pick_free_port())
    assert first.launched
    with pytest.raises(LocalServerError, match=r"other flags \(--a 1\) than wanted \(--b\)"):
        _start(["--b"], same_args=True)
    again = _start(["--a", "1"], same_args=True)
    assert not again.launched and again.server == first.server
    # without same_args a running server is reused whatever its flags (the CLI's behaviour)
    assert _start(["--b"]).server == first.server
    assert len(seen) == 1  # nothing else was launched


def test_same_args_reads_the_flags_of_a_server_whose_state_lacks_them(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a state an older ttftscope wrote has no flags: they are read from the process's argv,
    # which ends as server_command's fixed part does (--max-model-len N), then the extras
    use_fake(monkeypatch)
    fake = ls.server_command

    def command(python: Path, model: Path, port: int, extra: Sequence[str] = ()) -> list[str]:
        return [*fake(python, model, port, extra), "--max-model-len", "131072", *extra]

    monkeypatch.setattr(ls, "server_command", command)
    server = ls.start(
        st.pick_free_port(), extra_args=SERVER_ARGS, wait_s=20, progress=lambda _: None
    )
    older = localstate.LocalServer(server.base_url, server.port, server.pid, server.model, "/l")
    localstate.write_state(older)  # as an older ttftscope wrote it: no flags
    with ls.running_server(extra_args=SERVER_ARGS, wait_s=20, same_args=True) as adopted:
        assert adopted == older  # its argv has the wanted flags
    other = ls.running_server(extra_args=AGENT_FLAGS, wait_s=20, same_args=True)
    with (
        pytest.raises(
            LocalServerError,
            match=r"other flags \(--enable-auto-tool-choice --tool-call-parser hermes --otlp",
        ),
        other,
    ):
        pytest.fail("adopted a server started with other flags")
    localstate.write_state(dataclasses.replace(older, pid=2**22 + 7))  # no such process: unknown
    with pytest.raises(LocalServerError, match="flags unknown"):
        check_same_args(localstate.read_state() or older, SERVER_ARGS)
    localstate.write_state(older)
    assert ls.status() == older  # refused, not stopped


def test_state_with_malformed_args_is_unreadable(cache: Path) -> None:
    localstate.state_path().write_text(
        '{"base_url": "u", "port": 1, "pid": 2, "model": "m", "log_path": "l", "args": "--x"}'
    )
    assert localstate.read_state() is None
