"""What the report's verdict used to say, now said by doctor rules, and said once.

The path to the server, a front end that still dominates through the gateway, a bench judged
on its run-wide histograms (once for the targets that share them), prefill at a low hit rate,
samples another client overlapped; and no advice that contradicts another: a queueing run's
front end is not called tokenization.
"""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    failed,
    probe_records,
    queue_samples,
    record,
    write_probe_dir,
)
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.findings import Finding
from ttftscope.records import ProbeRecord
from ttftscope.results.runs import load_runs

# bench under concurrency: no request owns a histogram observation, records hold the client's
# view only (its summary has the servers' means over the run)
_SERVER_VIEW = ("server_ttft_ms", "queue_ms", "prefill_ms", "server_frontend_ms")
_CLIENT_ONLY = {k: None for k in (*_SERVER_VIEW, "outside_server_ms", "prefix_hits")}
_SLOW = Parts(frontend=600.0, prefill=200.0, queue=10.0, outside=20.0)


def _findings(*paths: Path) -> tuple[list[Finding], list[str]]:
    return diagnose_runs(load_runs(list(paths)))


def _of(findings: list[Finding], fid: str) -> list[Finding]:
    return [f for f in findings if f.id == fid]


def test_outside_the_server_dominating_names_the_network_path(tmp_path: Path) -> None:
    recs = [record(i, Parts(frontend=5.0, prefill=20.0, outside=70.0)) for i in range(5)]
    write_probe_dir(tmp_path, recs)
    (f,) = _of(_findings(tmp_path)[0], "network-path")
    assert f.title == "74% of TTFT is spent outside the server (chat at 8,000 tokens)"
    assert "70 ms of 95 ms median TTFT" in f.evidence[0].fact
    assert "keep connections alive" in f.remedy and f.saving_ms == 70.0


def test_a_fast_or_balanced_ttft_has_no_network_finding(tmp_path: Path) -> None:
    fast = [record(i, Parts(frontend=2.0, prefill=5.0, outside=30.0)) for i in range(5)]
    write_probe_dir(tmp_path / "fast", fast)  # 37 ms: nothing worth removing
    even = [record(i, Parts(frontend=40.0, prefill=40.0, outside=30.0)) for i in range(5)]
    write_probe_dir(tmp_path / "even", even)  # 27%: not the largest share of note
    assert not _of(_findings(tmp_path / "fast", tmp_path / "even")[0], "network-path")


def test_a_front_end_that_dominates_through_the_gateway_points_at_the_gateway(
    tmp_path: Path,
) -> None:
    recs = bench_records(10, Parts(frontend=60.0, prefill=20.0), targets=("gateway",))
    BenchDir(records=recs).write(tmp_path)
    (f,) = _of(_findings(tmp_path)[0], "tokenization-bound")
    assert "even through the gateway (gateway)" in f.title
    assert "ttftscope_gateway_passthrough_total" in f.remedy
    assert "run `ttftscope gateway" not in f.remedy


def _client_only(records: list[ProbeRecord]) -> list[ProbeRecord]:
    return [r.model_copy(update=_CLIENT_ONLY) for r in records]


def test_a_bench_without_per_request_parts_is_judged_on_its_histograms(tmp_path: Path) -> None:
    summary = {
        "run_id": "bench-1",
        "mean_ttft_ms": 900.0,
        "server_mean_ttft_ms": 880.0,
        "server_mean_frontend_ms": 600.0,
        "server_mean_queue_ms": 10.0,
        "server_mean_prefill_ms": 200.0,
        "prefix_hit_rate": 0.99,
    }
    BenchDir(records=_client_only(bench_records(10, _SLOW)), summary=summary).write(tmp_path)
    (f,) = _of(_findings(tmp_path)[0], "tokenization-bound")
    assert "67% server front end" in f.title and "direct, run-wide server histograms" in f.title
    assert "600 ms of 900 ms mean TTFT (67%)" in f.evidence[0].fact
    assert "`ttftscope gateway" in f.remedy


def test_targets_on_shared_histograms_get_one_finding_that_names_both(tmp_path: Path) -> None:
    # direct and gateway on one server: its histograms mix both targets' requests, so a
    # per-target finding would blame the gateway for the direct requests' front end
    records = _client_only(bench_records(10, _SLOW, targets=("direct", "gateway")))
    summary = {
        "run_id": "bench-1",
        "mean_ttft_ms": 900.0,
        "server_mean_ttft_ms": 880.0,
        "server_mean_frontend_ms": 600.0,
        "server_mean_prefill_ms": 200.0,
    }
    BenchDir(records=records, summary=summary).write(tmp_path)
    (f,) = _of(_findings(tmp_path)[0], "tokenization-bound")
    assert "(direct + gateway, run-wide server histograms)" in f.title
    assert "even through the gateway" not in f.title


def test_prefill_at_a_low_hit_rate_says_prompts_are_recomputed(tmp_path: Path) -> None:
    recs = [record(i, Parts(frontend=5.0, prefill=200.0, hit_rate=0.3)) for i in range(5)]
    write_probe_dir(tmp_path, recs)
    (f,) = _of(_findings(tmp_path)[0], "prefix-cache-off")
    assert f.title.startswith("prefill is 93% of TTFT at a 0.30 prefix hit rate (chat at 8,000")
    assert "send a session to one replica" in f.remedy
    # the same prefill at a good hit rate is the model's own work: no finding
    good = [record(i, Parts(frontend=5.0, prefill=200.0, hit_rate=0.9)) for i in range(5)]
    write_probe_dir(tmp_path / "good", good)
    assert not _of(_findings(tmp_path / "good")[0], "prefix-cache-off")


def test_samples_another_client_overlapped_are_said_to_be_left_out(tmp_path: Path) -> None:
    recs = probe_records(sizes=(0,), variants=("chat",))
    recs[1] = recs[1].model_copy(update={"contaminated": True})
    write_probe_dir(tmp_path, recs)
    (f,) = _of(_findings(tmp_path)[0], "shared-server")
    assert f.severity == "info" and f.title == "1 of 3 samples overlapped another client's requests"


def test_a_queueing_run_is_not_also_called_tokenization_bound(tmp_path: Path) -> None:
    # the fresh-clone contradiction: front end 30% of TTFT beside a saturated queue
    recs = bench_records(30, Parts(queue=300.0, prefill=100.0, frontend=250.0))
    BenchDir(records=recs, samples=queue_samples(20, waiting_peak=9)).write(tmp_path)
    findings, notes = _findings(tmp_path)
    assert [f.id for f in findings] == ["queueing"]
    assert "not a tokenization problem" in findings[0].remedy
    assert any("not judged as tokenization while requests queue" in n for n in notes)


def test_what_cannot_be_judged_is_a_note(tmp_path: Path) -> None:
    BenchDir(
        records=[failed(i, run_id="b", target="direct") for i in range(3)], summary={"run_id": "b"}
    ).write(tmp_path / "failed")
    BenchDir(records=_client_only(bench_records(5, Parts()))).write(tmp_path / "client")
    _, notes = _findings(tmp_path / "failed", tmp_path / "client")
    assert "failed: no successful request to measure; see the failures" in notes
    assert any(n.startswith("client: the records have no server-side parts") for n in notes)
