"""The live ``ttftscope doctor`` against the scenario server: its own probe is labelled and
never the user's client's problem, it says how long it may take and keeps to its budget, and
it names an injected bottleneck as the records' doctor does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_doctor import _run
from tests.doctor.scenarioserver import MODEL, Costs, ScenarioServer
from ttftscope.records import DOCTOR_PROBE, RequestRecord, read_records


def _live(
    costs: Costs,
    extra: list[str],
    tmp: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[int, str, str, list[RequestRecord]]:
    with ScenarioServer(costs) as srv:
        args = ["--base-url", f"{srv.root}/v1", "--model", MODEL, "--sample-seconds", "0.2"]
        out = tmp / "out"
        code, stdout, err = _run(
            [*args, "--result-dir", str(out), "--json", *extra], tmp, capsys, monkeypatch
        )
    records = [r for p in sorted(out.glob("probe-*.jsonl")) for r in read_records(p)]
    return code, stdout, err, records


def test_a_healthy_server_live_is_no_problem_and_the_probe_is_labelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err, records = _live(Costs(), [], tmp_path, capsys, monkeypatch)
    data = json.loads(out)
    assert code == 0 and [f for f in data["findings"] if f["severity"] != "info"] == []
    assert "short probe (chat/non-ASCII): 15 requests, 60 s at most (--probe-seconds)…" in err
    assert len(records) == 15 and {r.variant for r in records} == {"chat", "non_ascii"}
    assert all(DOCTOR_PROBE in r.notes and r.tokenize_ms is None for r in records)


def test_the_live_probe_keeps_to_its_time_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ten requests of at least 300 ms each cannot all start within one second
    _, _, err, records = _live(
        Costs(network_s=0.3), ["--probe-seconds", "1"], tmp_path, capsys, monkeypatch
    )
    assert "time budget of 1 s reached: the remaining requests are skipped" in err
    assert 1 <= len(records) < 15


def test_the_live_doctor_names_an_injected_network_delay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _, _ = _live(Costs(network_s=0.3), [], tmp_path, capsys, monkeypatch)
    raised = [f for f in json.loads(out)["findings"] if f["severity"] != "info"]
    assert code == 1 and [f["id"] for f in raised] == ["network-path"]
    assert 225.0 <= raised[0]["saving_ms"] <= 375.0


def test_the_live_doctor_names_a_slow_non_ascii_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its probe's chat again in non-ASCII letters: a server whose front end is 25× slower
    per non-ASCII token is named, and nothing else rises above info."""
    costs = Costs(frontend_s_per_1k=0.0015, non_ascii_factor=25.0)
    with ScenarioServer(costs) as srv:
        args = ["--base-url", f"{srv.root}/v1", "--model", MODEL, "--sample-seconds", "0.2"]
        code, out, _ = _run(
            [*args, "--result-dir", str(tmp_path / "out"), "--json"], tmp_path, capsys, monkeypatch
        )
        charged = [c.non_ascii_ms for c in srv.charged if c.non_ascii_chars]
    raised = [f for f in json.loads(out)["findings"] if f["severity"] != "info"]
    assert code == 1 and [f["id"] for f in raised] == ["non-ascii-slow-path"]
    injected = sorted(charged[-3:])[1]  # the three warm ones at 8,000 tokens: their median
    assert abs(raised[0]["saving_ms"] - injected) <= 0.25 * injected, (raised[0], injected)
