"""The long-running commands on an 80-column terminal: no line wider than the terminal, no
number or cell cut with an ellipsis (issue 22). ``probe`` and ``bench`` have their own tests
(tests/cli/test_first_hour.py, tests/bench/test_cli.py); this covers what reads their
results: ``report``, ``doctor`` and ``config show``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.pty_run import run_in_pty
from tests.doctor.queueserver import QueueServer
from tests.faultserver import FaultServer

CLI = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _lines(out: str) -> list[str]:
    return [line.rstrip() for line in re.split(r"\r?\n|\r", _ANSI.sub("", out))]


def _unbreakable(line: str) -> bool:
    """A line only a path or URL of its own makes wider than the terminal."""
    return any(len(word) > 30 and ("/" in word) for word in line.split())


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer_paths: dict[str, Path]) -> Path:
    out = tmp_path_factory.mktemp("eighty") / "results"
    with FaultServer() as srv:
        args = ["probe", "--base-url", srv.base_url("normal"), "--model", "tiny-llama"]
        args += ["--repeat", "2", "--context-tokens", "0,2000", "--result-dir", str(out)]
        args += ["--tokenizer", str(tokenizer_paths["qwen2"])]
        done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize(
    "args",
    [
        ["report", "{dir}", "--out", "{dir}/report.html"],
        ["doctor", "--no-live", "--records", "{dir}"],
        ["config", "show"],
    ],
    ids=["report", "doctor", "config-show"],
)
def test_fits_80_columns_and_cuts_no_number(probe_dir: Path, args: list[str]) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(probe_dir.parent)}
    argv = [a.replace("{dir}", str(probe_dir)) for a in args]
    lines = _lines(run_in_pty([*CLI, *argv], columns=80, env=env))
    assert lines and not any("Traceback" in line for line in lines), lines
    too_wide = [line for line in lines if len(line) > 80 and not _unbreakable(line)]
    assert too_wide == []
    assert not [line for line in lines if re.search(r"\d…", line)]  # a number cut short


def test_doctor_live_with_a_queue_fits_80_columns(tmp_path: Path) -> None:
    """The sampling bar on a terminal and the queueing finding with its evidence."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    if "PYTHONPATH" in os.environ:  # the sources under test, where they are on the path
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    with QueueServer([6]) as srv:
        argv = ["doctor", "--base-url", f"{srv.root}/v1", "--model", "tiny", "--no-probe"]
        out = run_in_pty([*CLI, *argv, "--sample-seconds", "0.4"], columns=80, env=env)
    lines = _lines(out)
    assert any("requests wait in the server's queue now" in line for line in lines), lines
    too_wide = [line for line in lines if len(line) > 80 and not _unbreakable(line)]
    assert too_wide == []
    assert not [line for line in lines if re.search(r"\d…", line)]
