"""``ttftscope bench`` from the command line: JSON, plain progress, table, exit codes.

The command is added to the group here (``cli/__init__.py`` registers it in the package),
so the subprocess runs see the real error mapping and exit codes.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.cli.pty_run import run_in_pty
from tests.faultserver import FaultOptions, FaultServer
from ttftscope.cli.bench import bench
from ttftscope.cli.console import make_console
from ttftscope.cli.options import CliState
from ttftscope.errors import ConfigError
from ttftscope.records import read_records_report

_MAIN = "from ttftscope.cli import cli, main; from ttftscope.cli.bench import bench; "
_MAIN += "cli.add_command(bench); main()"
QUICK = ["--model", "tiny-llama", "--context-tokens", "0", "--think-time-s", "0"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _MAIN, "bench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "TTFTSCOPE_CACHE_DIR": str(cwd / "c")},
        timeout=60,
        check=False,
    )


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_json_summary_and_plain_progress_lines(isolated: Path) -> None:
    err = io.StringIO()
    state = CliState(err=make_console(file=err))
    with FaultServer(FaultOptions(chunk_delay_s=0.01)) as srv:
        args = ["--base-url", srv.base_url(), *QUICK, "--sessions", "2", "--num-prompts", "6"]
        result = CliRunner().invoke(bench, [*args, "--json", "--result-dir", "out"], obj=state)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["completed"] == 6 and summary["targets"]["direct"]["completed"] == 6
    assert (isolated / "out" / "bench-summary.json").is_file()
    lines = err.getvalue().splitlines()
    assert "bench: 6 requests in 2 sessions" in lines
    assert any(line.startswith("bench: 6/6 done · TTFT p50") for line in lines)


def test_bad_flags_are_config_errors(isolated: Path) -> None:
    result = CliRunner().invoke(bench, ["--shard", "3/2"], obj=CliState())
    assert isinstance(result.exception, ConfigError) and "--shard" in str(result.exception)


def test_table_and_contamination_in_the_terminal(tmp_path: Path) -> None:
    with FaultServer() as srv:
        proc = _cli(
            "--base-url",
            srv.base_url(),
            *QUICK,
            "--num-prompts",
            "8",
            "--sessions",
            "4",
            "--target",
            "direct",
            "--target",
            f"limited={srv.base_url('rate_limited')}",
            cwd=tmp_path,
        )
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "direct 4 0" in out and "limited 0 4" in out
    assert "CONTAMINATED: 4 of the requests were rate limited" in out
    assert "records: ttftscope-results/bench-" in out


def test_a_server_that_dies_exits_with_its_code_and_keeps_the_records(tmp_path: Path) -> None:
    records = tmp_path / "out" / "bench-records.jsonl"
    with FaultServer(FaultOptions(first_content_delay_s=0.05, chunk_delay_s=0.05)) as srv:
        args = [
            "--base-url",
            srv.base_url(),
            *QUICK,
            "--num-prompts",
            "5000",
            "--result-dir",
            "out",
        ]
        proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "bench", *args],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(read_records_report(records).records) < 5:
            time.sleep(0.05)
    out, err = proc.communicate(timeout=30)  # the server stopped when the block ended
    assert proc.returncode == 4, err
    assert "error: bench stopped: target 'direct'" in err and "Traceback" not in err
    got = read_records_report(records)
    assert got.skipped == 0 and sum(r.ok for r in got.records) >= 4
    assert "direct" in out  # the table of what finished came first


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def test_on_a_terminal_a_live_bar_shows_ttft_counts_and_fits_80_columns(tmp_path: Path) -> None:
    with FaultServer(FaultOptions(first_content_delay_s=0.05, chunk_delay_s=0.05)) as srv:
        args = ["--base-url", srv.base_url(), *QUICK, "--num-prompts", "24", "--sessions", "4"]
        args += ["--result-dir", str(tmp_path / "out")]
        text = run_in_pty(
            [sys.executable, "-c", _MAIN, "bench", *args],
            columns=80,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PWD": str(tmp_path)},
        )
    frames = [f for f in re.split(r"[\r\n]", _ANSI.sub("", text)) if f.strip()]
    paths = ("records: ", "samples: ", "summary: ")  # a path is never cut in two
    assert all(len(f) <= 80 for f in frames if not f.startswith(paths)), max(frames, key=len)
    assert any(re.search(r"p50 \d+ms p99 \d+ms ok \d+ fail 0", f) for f in frames)
    assert any(f.strip().startswith("direct") and " 24 " in f for f in frames)


def test_api_flag_picks_the_api_and_the_summary_names_it(isolated: Path) -> None:
    with FaultServer() as srv:
        args = ["--base-url", srv.base_url(), *QUICK, "--sessions", "1", "--num-prompts", "2"]
        result = CliRunner().invoke(
            bench, [*args, "--api", "responses", "--json", "--result-dir", "out"], obj=CliState()
        )
        paths = {r.path for r in srv.requests if r.method == "POST"}
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["api"] == "responses" and paths == {"/normal/v1/responses"}
    bad = CliRunner().invoke(bench, ["--api", "completions"], obj=CliState())
    assert bad.exit_code == 2 and "'completions' is not one of" in bad.output
