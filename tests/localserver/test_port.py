"""Which port the local server starts on: 8000 when free, else another, and explicit ports.

Tests that start a stand-in on the default port skip when 8000 is busy (a real vLLM of the
e2e tests may hold it); the others use ports the kernel picks, or hold a port themselves.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.localserver.standin import holding, use_fake
from ttftscope import localstate
from ttftscope.config.schema import DEFAULT_BASE_URL
from ttftscope.errors import LocalServerError
from ttftscope.localserver import process as ls
from ttftscope.localserver import state as st
from ttftscope.localserver.procgroup import stop


def test_default_port_is_the_one_commands_default_to() -> None:
    assert st.DEFAULT_PORT == 8000
    assert urlsplit(DEFAULT_BASE_URL).port == st.DEFAULT_PORT
    assert urlsplit(DEFAULT_BASE_URL).hostname == st.HOST


def test_port_is_free_sees_a_listening_socket() -> None:
    port = st.pick_free_port()
    assert st.port_is_free(port)
    with holding(port) as sock:
        assert sock is not None
        assert not st.port_is_free(port)
    assert st.port_is_free(port)


def test_start_uses_port_8000_when_it_is_free(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not st.port_is_free(st.DEFAULT_PORT):
        pytest.skip("port 8000 is in use on this machine (e.g. by the e2e tests' vLLM)")
    use_fake(monkeypatch, delay=0.05)
    lines: list[str] = []
    server = ls.start(wait_s=20, progress=lines.append)
    try:
        assert server.port == st.DEFAULT_PORT
        assert server.base_url == "http://127.0.0.1:8000/v1"
        assert not any("taken" in line for line in lines)
    finally:
        assert stop(grace_s=2.0) is True  # free 8000 again at once


def test_start_moves_off_a_taken_port_8000_and_says_so(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)
    lines: list[str] = []
    with holding(st.DEFAULT_PORT):  # held by this test, or already by something else
        server = ls.start(wait_s=20, progress=lines.append)
    assert server.port != st.DEFAULT_PORT
    assert ls.healthy(server.root_url)
    assert localstate.read_state() == server  # how the other commands find it
    notes = [line for line in lines if "port 8000 is taken" in line]
    assert notes == [
        f"port 8000 is taken by another program; starting on 127.0.0.1:{server.port} instead "
        "(commands find it through the local server's state file)"
    ]


def test_explicit_taken_port_is_an_error_before_any_install(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)

    def no_install(progress: object = None) -> Path:
        raise AssertionError("a taken port must fail before the install")

    monkeypatch.setattr(ls, "ensure_vllm_venv", no_install)
    port = st.pick_free_port()
    with holding(port), pytest.raises(LocalServerError, match=f"port {port} ") as info:
        ls.start(port, wait_s=5, progress=lambda _: None)
    assert info.value.hint is not None and "--port" in info.value.hint
    assert str(port) in info.value.hint
    assert info.value.exit_code == LocalServerError.exit_code
    assert localstate.read_state() is None


def test_explicit_port_of_our_own_running_server_is_reused(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)
    port = st.pick_free_port()
    first = ls.ensure_started(port, wait_s=20, progress=lambda _: None)
    again = ls.ensure_started(port, wait_s=20, progress=lambda _: None)  # taken, but by us
    assert first.launched and not again.launched
    assert again.server == first.server


def test_start_says_what_it_waits_for_and_how_long_it_took(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)
    lines: list[str] = []
    server = ls.start(st.pick_free_port(), wait_s=20, progress=lines.append)
    assert lines[0] == f"vLLM log: {server.log_path}"
    assert lines[1] == f"starting vLLM on {server.base_url} (pid {server.pid}; 1-4 min)"
    assert lines[-1].startswith("vLLM ready after ") and lines[-1].endswith(" s")
    assert all("\r" not in line for line in lines)
