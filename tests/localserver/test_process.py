"""Unit tests of the local vLLM server manager, with a stand-in server instead of real vLLM.

The stand-in (:mod:`tests.localserver.standin`) is a small Python HTTP server whose command
line contains "vllm" (the manager checks that before it signals a recorded pid); the real
start/stop runs in tests/e2e.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.localserver.standin import use_fake
from ttftscope import localstate
from ttftscope.cli.local import local_server
from ttftscope.errors import LocalServerError
from ttftscope.localserver import process as ls
from ttftscope.localserver import state as st
from ttftscope.localserver.install import install_deps
from ttftscope.localserver.procgroup import stop


def group_pids(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,pgid="], capture_output=True, text=True).stdout
    return [int(p) for p, g in (line.split() for line in out.splitlines()) if int(g) == pgid]


def test_pick_free_port_is_bindable_on_loopback() -> None:
    port = st.pick_free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_state_round_trip_and_garbage(tmp_path: Path) -> None:
    server = localstate.LocalServer("http://127.0.0.1:5/v1", 5, 42, "m", "/log", started_at=1.5)
    path = tmp_path / "state.json"
    localstate.write_state(server, path)
    assert localstate.read_state(path) == server
    path.write_text("{not json")
    assert localstate.read_state(path) is None
    path.write_text('{"port": 5}')
    assert localstate.read_state(path) is None


def test_server_command_has_required_flags_and_extra_args_last() -> None:
    cmd = ls.server_command(Path("/v/bin/python"), Path("/models/tiny"), 8123, ["--x", "1"])
    assert cmd[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    flags = {flag: cmd[cmd.index(flag) + 1] for flag in cmd if flag.startswith("--")}
    assert flags["--model"] == "/models/tiny"
    assert flags["--host"] == "127.0.0.1"
    assert flags["--port"] == "8123"
    assert flags["--dtype"] == "float32"
    assert flags["--served-model-name"] == ls.SERVED_MODEL
    assert int(flags["--max-model-len"]) == ls.MAX_MODEL_LEN
    assert "--enable-prefix-caching" in cmd
    assert cmd[-2:] == ["--x", "1"]


def test_server_env_adds_cpu_settings_without_mutating_base() -> None:
    base = {"PATH": "/bin", "VLLM_CPU_KVCACHE_SPACE": "40"}
    env = ls.server_env(base)
    assert env["PATH"] == "/bin"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert base["VLLM_CPU_KVCACHE_SPACE"] == "40"


def test_install_deps_skips_torch_family_extras_and_foreign_markers() -> None:
    metadata = "\n".join(
        [
            "Name: vllm-cpu",
            "Requires-Dist: regex",
            "Requires-Dist: transformers<5.20.0,>=5.16.1",
            "Requires-Dist: torch==2.13.0+cpu; platform_machine == 'x86_64'",
            "Requires-Dist: torchvision",
            "Requires-Dist: torch_audio_not_skipped",
            "Requires-Dist: torchcodec>=0.14",
            "Requires-Dist: pandas; extra == 'bench'",
            "Requires-Dist: protobuf==7.36.1; platform_machine == 'no-such-machine'",
            "Requires-Dist: six>=1.16.0; python_version >= '3.0'",
        ]
    )
    assert install_deps(metadata) == [
        "regex",
        "transformers<5.20.0,>=5.16.1",
        "torch_audio_not_skipped",
        "six>=1.16.0",
    ]


def test_status_and_stop_without_server(cache: Path) -> None:
    assert ls.status() is None
    assert stop() is False


def test_status_drops_state_of_dead_process(cache: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    localstate.write_state(localstate.LocalServer("http://127.0.0.1:9/v1", 9, proc.pid, "m", "/l"))
    assert ls.status() is None
    assert not localstate.state_path().exists()


def test_start_reuse_and_stop_kill_the_whole_group(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)
    port = st.pick_free_port()  # not 8000: a real vLLM of the e2e tests may want that one
    server = ls.start(port, wait_s=20, progress=lambda _: None)
    assert server.port == port
    assert ls.healthy(server.root_url)
    assert ls.status() == server
    assert ls.start(wait_s=20, progress=lambda _: None) == server  # reused, not restarted
    assert ls.start(port, wait_s=20, progress=lambda _: None) == server  # its own port: reused
    with pytest.raises(LocalServerError, match="already runs"):
        ls.start(server.port + 1, wait_s=5)
    deadline = time.monotonic() + 10
    while len(group_pids(server.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(group_pids(server.pid)) >= 2  # the stand-in and its child
    assert stop() is True
    assert group_pids(server.pid) == []
    assert ls.status() is None
    assert not localstate.state_path().exists()


def test_stop_falls_back_to_sigkill(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake(monkeypatch, mode="stubborn")
    server = ls.start(st.pick_free_port(), wait_s=20, progress=lambda _: None)
    assert stop(grace_s=0.5) is True
    assert group_pids(server.pid) == []  # the stand-in ignores SIGTERM: only SIGKILL ends it


def test_start_reports_log_tail_when_server_dies(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch, mode="die")
    with pytest.raises(LocalServerError, match="fake engine failed") as info:
        ls.start(st.pick_free_port(), wait_s=20, progress=lambda _: None)
    assert info.value.exit_code == 15
    assert not localstate.state_path().exists()


def test_cli_status_start_stop(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    stopped = runner.invoke(local_server, ["status"])
    assert stopped.exit_code == 1 and "stopped: no local server is running" in stopped.output
    use_fake(monkeypatch)
    port = str(st.pick_free_port())
    result = runner.invoke(local_server, ["start", "--port", port, "--wait-s", "20"])
    assert result.exit_code == 0, result.output
    assert f"running: http://127.0.0.1:{port}/v1 (pid " in result.output
    assert f"model: {ls.SERVED_MODEL}" in result.output
    assert runner.invoke(local_server, ["status"]).output.startswith(
        f"running: http://127.0.0.1:{port}/v1 (pid "
    )
    status = runner.invoke(local_server, ["status", "--json"])
    assert status.exit_code == 0 and '"port"' in status.output
    assert '"state": "running"' in status.output
    assert "stopped" in runner.invoke(local_server, ["stop"]).output
    after = runner.invoke(local_server, ["status", "--json"])
    assert after.exit_code == 1 and '{"state": "stopped"}' in after.output


def test_cli_start_failure_uses_error_exit_code(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ttftscope.cli import main

    use_fake(monkeypatch, mode="die")
    with pytest.raises(SystemExit) as info:
        main(["local-server", "start", "--port", str(st.pick_free_port()), "--wait-s", "20"])
    assert info.value.code == LocalServerError.exit_code
    assert "fake engine failed" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_stop_leaves_unrelated_reused_pid_alone(cache: Path) -> None:
    # A stale state file whose pid now belongs to some other program must not be signalled.
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        cmdline = Path(f"/proc/{other.pid}/cmdline")
        deadline = time.monotonic() + 10
        while not cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)  # a stale pid belongs to a long-running program, not one mid-exec
        localstate.write_state(
            localstate.LocalServer("http://127.0.0.1:9/v1", 9, other.pid, "m", "/l")
        )
        assert stop(grace_s=0.5) is False
        assert other.poll() is None
        assert not localstate.state_path().exists()
    finally:
        os.killpg(other.pid, 9)
        other.wait()


def test_running_server_stops_only_what_it_launched(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)
    first = ls.ensure_started(st.pick_free_port(), wait_s=20, progress=lambda _: None)
    assert first.launched
    with ls.running_server(wait_s=20) as reused:  # another user's server: reused, kept
        assert reused == first.server
    assert ls.status() == first.server
    assert stop(only_pid=first.server.pid + 1) is False  # not the recorded server
    assert ls.status() == first.server
    assert stop(only_pid=first.server.pid) is True
    with ls.running_server(st.pick_free_port(), wait_s=20) as own:  # launched: stopped on exit
        assert ls.healthy(own.root_url)
    assert ls.status() is None


def test_a_server_stopped_by_another_command_is_still_reaped(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake(monkeypatch)
    with ls.running_server(st.pick_free_port(), wait_s=20, progress=lambda _: None) as server:
        # what `ttftscope local-server stop` in another process does: the group killed, the
        # state file gone; that process cannot collect our child's exit status
        os.killpg(server.pid, 9)
        localstate.state_path().unlink()
    with pytest.raises(ChildProcessError):  # already collected: no zombie is left
        os.waitpid(server.pid, os.WNOHANG)
