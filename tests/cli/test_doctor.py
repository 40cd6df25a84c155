"""``ttftscope doctor`` from the command line: output, JSON, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.doctor.queueserver import QueueServer
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


def _live(
    waiting: list[float],
    extra: list[str],
    tmp: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[int, str, str]:
    """``doctor`` against a stand-in vLLM, no probe, a 0.2 s window (five scrapes)."""
    with QueueServer(waiting) as srv:
        args = ["--base-url", f"{srv.root}/v1", "--model", "tiny", "--no-probe"]
        return _run([*args, "--sample-seconds", "0.2", *extra], tmp, capsys, monkeypatch)


def test_a_queue_that_stays_in_metrics_is_queueing_with_what_was_sampled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _live([6], ["--json"], tmp_path, capsys, monkeypatch)
    data = json.loads(out)
    (q,) = [f for f in data["findings"] if f["id"] == "queueing"]
    facts = [e["fact"] for e in q["evidence"]]
    assert code == 1 and facts[0].startswith("waiting 6 / 6 / 6 (min / median / max) over 5")
    assert any("--max-num-seqs not exported" in f and "81,920 tokens" in f for f in facts)
    assert "start command" in q["remedy"] and q["saving_ms"] == 200.0
    assert any("the server's queue, 5 /metrics scrapes" in c for c in data["checked"])
    assert "watching the server's queue (/metrics) for 0.2 s" in err


def test_the_live_queue_reads_well_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _live([6], [], tmp_path, capsys, monkeypatch)
    assert code == 1 and "requests wait in the server's queue now" in out
    words = " ".join(out.split())  # the saving follows the queue's fix, not "ids will not"
    assert "token ids will not fix it): the server ran" in words
    assert "otherwise add a replica (saves ~200 ms per request)" in words
    assert max(len(line) for line in (out + err).splitlines()) <= 80


def test_an_empty_queue_or_one_glimpse_of_one_is_no_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = _live([0], [], tmp_path, capsys, monkeypatch)
    assert code == 0 and "no problem found" in out
    code, out, _ = _live([0, 0, 6, 0], [], tmp_path, capsys, monkeypatch)
    assert code == 0 and "no problem found" in out and "above 0 in 1 of 5" in out


def test_a_zero_window_takes_one_scrape_and_says_what_it_saw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with QueueServer([6]) as srv:
        args = ["--base-url", f"{srv.root}/v1", "--model", "tiny", "--no-probe"]
        code, out, err = _run([*args, "--sample-seconds", "0"], tmp_path, capsys, monkeypatch)
        scrapes = srv.scrapes
    assert code == 0 and scrapes == 1 and "watching" not in err
    assert "one /metrics scrape showed 6 waiting" in out


def test_sample_seconds_without_live_checks_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_probe_dir(tmp_path / "r", probe_records(sizes=(0,), variants=("chat",)))
    args = ["--no-live", "--records", "r", "--sample-seconds", "3"]
    code, _, err = _run(args, tmp_path, capsys, monkeypatch)
    assert code == 2 and "drop --no-live" in err


def _section(readme: str, heading: str) -> str:
    text = (Path(__file__).resolve().parents[2] / readme).read_text(encoding="utf-8")
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_document_the_exit_codes_doctor_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_probe_dir(tmp_path / "ok", probe_records(sizes=(0,), variants=("chat",)))
    write_probe_dir(tmp_path / "warn", [*probe_records(sizes=(0,), variants=("chat",)), failed(9)])
    codes = {
        args: _run(["--no-live", "--records", *args], tmp_path, capsys, monkeypatch)[0]
        for args in (("ok",), ("warn",), ("warn", "--json"), ("nope",))
    }
    assert codes == {("ok",): 0, ("warn",): 1, ("warn", "--json"): 1, ("nope",): 2}
    english = " ".join(_section("README.md", "Exit codes").split())
    assert (
        "`doctor` exits 1 when any finding is a warning or worse, with or without `--json`"
        in english
    )
    assert "0 when none is" in english and "2: a `--records` path that does not exist" in english
    chinese = _section("README.zh-CN.md", "退出码")
    assert "`doctor` 就以 1 退出，无论是否带 `--json`" in chinese
    assert "以 0 退出" in chinese and "（2：`--records` 路径不存在" in chinese
