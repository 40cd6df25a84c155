"""What a new user meets first: the local server is found, output fits, pipes are not wrapped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.pty_run import run_in_pty
from tests.faultserver import FaultServer

CLI = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(home), **extra}


def _run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[tuple[FaultServer, Path]]:
    """A server recorded in the local server's state file, as `local-server start` leaves it."""
    cache = tmp_path / "cache"
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "vllm-standin"]
    )
    try:
        with FaultServer() as srv:
            state = cache / "localserver" / "state.json"
            state.parent.mkdir(parents=True)
            state.write_text(
                json.dumps(
                    {
                        "base_url": srv.base_url("normal"),
                        "port": srv.port,
                        "pid": sleeper.pid,
                        "model": "tiny-llama",
                        "log_path": str(tmp_path / "server.log"),
                    }
                )
            )
            yield srv, cache
    finally:
        sleeper.kill()
        sleeper.wait()


def test_with_nothing_configured_commands_use_the_running_local_server(
    tmp_path: Path, standin: tuple[FaultServer, Path]
) -> None:
    srv, cache = standin
    env = _env(tmp_path, TTFTSCOPE_CACHE_DIR=str(cache))
    ping = _run("ping", cwd=tmp_path, env=env)
    assert ping.returncode == 0, ping.stderr
    assert srv.base_url("normal") in ping.stdout and "model=tiny-llama" in ping.stdout
    assert srv.requests[-1].path.endswith("/normal/v1/chat/completions")
    shown = _run("config", "show", "--json", cwd=tmp_path, env=env)
    rows = {r["key"]: r for r in json.loads(shown.stdout)}
    assert rows["api.base_url"]["value"] == srv.base_url("normal")
    assert rows["api.base_url"]["source"].startswith("local server")
    assert rows["model.default"]["value"] == "tiny-llama"
    # anything configured wins over the discovered server
    env["TTFTSCOPE_API__BASE_URL"] = "http://127.0.0.1:9/v1"
    refused = _run("ping", cwd=tmp_path, env=env)
    assert refused.returncode == 4
    assert f"a local vLLM runs at {srv.base_url('normal')}" in refused.stderr
    assert "env TTFTSCOPE_API__BASE_URL" in refused.stderr


def test_refused_without_local_server_says_how_to_start_one(tmp_path: Path) -> None:
    proc = _run("ping", "--base-url", "http://127.0.0.1:9/v1", cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 4
    assert "ttftscope local-server start" in proc.stderr


def test_piped_error_lines_are_not_wrapped(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/" + "a-rather-long-path-segment/" * 4 + "v1"
    proc = _run("ping", "--base-url", url, cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 4
    assert url in proc.stderr  # one piece, not split at column 80
    assert max(len(line) for line in proc.stderr.splitlines()) > 80


def test_probe_on_an_80_column_terminal_cuts_no_cell(tmp_path: Path) -> None:
    with FaultServer() as srv:
        args = ["probe", "--base-url", srv.base_url("normal"), "--model", "tiny-llama"]
        out = run_in_pty([*CLI, *args, "--repeat", "2"], columns=80, env=_env(tmp_path))
    text = _ANSI.sub("", out).replace("\r\n", "\n")
    assert "TTFT breakdown" in text and "Traceback" not in text
    table = text[text.index("TTFT breakdown") : text.index("ms, medians")]
    assert "…" not in table
    assert max(len(line) for line in table.splitlines()) <= 80
