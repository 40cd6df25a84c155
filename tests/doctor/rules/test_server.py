"""Prefill that dominates at a low hit rate, samples another client overlapped, and a queue
judged per target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    probe_records,
    record,
    write_probe_dir,
)
from ttftscope.doctor.rules.prefill import cache_findings
from ttftscope.doctor.rules.server import queue_findings, shared_server_findings
from ttftscope.findings import Finding
from ttftscope.report.html import runs_table
from ttftscope.results.runs import load_runs


def _cache(path: Path) -> list[Finding]:
    return cache_findings(load_runs([path]), None)


def _shared(path: Path) -> list[Finding]:
    return shared_server_findings(load_runs([path]))


def _of(findings: list[Finding], fid: str) -> list[Finding]:
    return [f for f in findings if f.id == fid]


def test_prefill_at_a_low_hit_rate_says_prompts_are_recomputed(tmp_path: Path) -> None:
    recs = [record(i, Parts(frontend=5.0, prefill=200.0, hit_rate=0.3)) for i in range(5)]
    write_probe_dir(tmp_path, recs)
    (f,) = _of(_cache(tmp_path), "prefix-cache-off")
    assert f.title.startswith("prefill is 93% of TTFT at a 0.30 prefix hit rate (chat at 8,000")
    assert "send a session to one replica" in f.remedy
    # the same prefill at a good hit rate is the model's own work: no finding
    good = [record(i, Parts(frontend=5.0, prefill=200.0, hit_rate=0.9)) for i in range(5)]
    write_probe_dir(tmp_path / "good", good)
    assert not _of(_cache(tmp_path / "good"), "prefix-cache-off")


def test_samples_another_client_overlapped_are_said_to_be_left_out(tmp_path: Path) -> None:
    recs = probe_records(sizes=(0,), variants=("chat",))
    recs[1] = recs[1].model_copy(update={"contaminated": True})
    write_probe_dir(tmp_path, recs)
    (f,) = _of(_shared(tmp_path), "shared-server")
    assert f.severity == "info" and f.title == "1 of 3 samples overlapped another client's requests"


@pytest.mark.parametrize("size", [0, 600, 3000])
def test_a_short_prompts_low_hit_rate_is_expected_not_a_finding(tmp_path: Path, size: int) -> None:
    # up to 3,500 prompt tokens: a fresh turn is a large part of the prompt, so a healthy
    # cache still misses much of it (the real vLLM: 0.37 at ~1,100 tokens)
    parts = Parts(frontend=5.0, prefill=200.0, hit_rate=0.37)
    recs = [record(i, parts, size=size) for i in range(5)]
    write_probe_dir(tmp_path, recs)
    assert not _of(_cache(tmp_path), "prefix-cache-off")


def test_queue_spread_is_per_target_and_matches_the_reports_rows(tmp_path: Path) -> None:
    slow, fast = Parts(queue=300.0, frontend=500.0), Parts(queue=300.0, frontend=0.0)
    recs = bench_records(10, slow, targets=("direct",)) + bench_records(
        10, fast, targets=("gateway",)
    )
    samples: list[dict[str, object]] = [
        {"t_s": i * 0.25, "running": 2, "waiting": i % 2, "targets": ["direct", "gateway"]}
        for i in range(20)
    ]
    BenchDir(records=recs, samples=samples, summary={"run_id": "b"}).write(tmp_path)
    runs = load_runs([tmp_path])
    (q,) = queue_findings(runs)
    facts = [e.fact for e in q.evidence]
    # prefill 30 + i % 5, outside 10: p50 and p99 of each target alone (fixture parts)
    assert "TTFT p99/p50 (direct) = 1.0 (844 / 842 ms)" in facts
    assert "TTFT p99/p50 (gateway) = 1.0 (344 / 342 ms)" in facts
    table = runs_table(runs)
    assert "<td>direct</td><td>bench</td><td>10</td><td>842</td>" in table
    assert "<td>844</td>" in table and "<td>344</td>" in table


def test_a_cold_cache_is_judged_per_target_not_averaged_away(tmp_path: Path) -> None:
    # direct's server has caching off, the gateway's has it on: together they average 0.45
    cold = bench_records(10, Parts(hit_rate=0.0), targets=("direct",))
    warm = bench_records(10, Parts(hit_rate=0.9), targets=("gateway",))
    BenchDir(records=cold + warm, summary={"run_id": "b"}).write(tmp_path)
    (f,) = _of(_cache(tmp_path), "prefix-cache-off")
    # direct's prefill is measured: the finding leads with it, for direct alone
    assert f.title.startswith("prefill is ") and "0.00 prefix hit rate (direct)" in f.title
    assert "the cache held 0.00 of their tokens" in f.evidence[0].fact


def test_the_peak_waiting_is_said_with_what_ran_beside_it(tmp_path: Path) -> None:
    """The demo's "peak 1 waiting while 4 ran": its samples were (3 running, 1 waiting) and
    (4 running, 0 waiting); when one waited, three ran (as the remedy beside it said)."""
    recs = [record(i, Parts(queue=5.0), target="direct") for i in range(4)]
    samples: list[dict[str, object]] = [
        {"t_s": t, "running": r, "waiting": w, "targets": ["direct"]}
        for t, r, w in ((0.0, 0, 0), (0.25, 3, 1), (0.5, 0, 0), (0.75, 4, 0), (1.0, 0, 0))
    ]
    BenchDir(records=recs, samples=samples, summary={"run_id": "b"}).write(tmp_path)
    (run,) = load_runs([tmp_path])
    (q,) = queue_findings([run])
    facts = " ".join(e.fact for e in q.evidence)
    assert "(peak 1 waiting while 3 ran)" in facts, facts
