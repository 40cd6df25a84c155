"""``ttftscope doctor`` from the command line: output, JSON, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.fixtures import failed, probe_records, write_probe_dir
from ttftscope.cli import main


def _run(
    args: list[str], tmp: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("HOME", str(tmp))
    monkeypatch.setenv("TTFTSCOPE_CACHE_DIR", str(tmp / "cache"))  # no local server found
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exc:
        main(["doctor", *args])
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_a_healthy_run_exits_0_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_probe_dir(tmp_path / "r", probe_records(sizes=(0,), variants=("chat",)))
    code, out, _ = _run(["--no-live", "--records", "r"], tmp_path, capsys, monkeypatch)
    assert code == 0 and "no problem found" in out


def test_warnings_exit_1_and_every_line_fits_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recs = [*probe_records(sizes=(0, 8000, 16000)), failed(99, retry_after="3")]
    write_probe_dir(tmp_path / "r", recs)
    code, out, _ = _run(["--no-live", "--records", "r"], tmp_path, capsys, monkeypatch)
    assert code == 1
    assert "tokenization" in out and "rate limiting" in out and "→ " in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_json_holds_every_finding_and_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_probe_dir(tmp_path / "r", [*probe_records(sizes=(0,), variants=("chat",)), failed(9)])
    code, out, _ = _run(["--no-live", "--records", "r", "--json"], tmp_path, capsys, monkeypatch)
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1
    (f,) = data["findings"]
    assert f["id"] == "rate-limited" and f["evidence"][0]["source"].endswith(".jsonl")


def test_a_missing_records_path_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = _run(["--no-live", "--records", "nope"], tmp_path, capsys, monkeypatch)
    assert code == 2 and "nope does not exist" in err and "hint:" in err


def test_an_unreachable_server_is_a_note_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = _run(
        ["--base-url", "http://127.0.0.1:9/v1", "--timeout", "2"], tmp_path, capsys, monkeypatch
    )
    assert code == 0 and "note: /metrics not read" in out
