"""The verdict's rules, with numbers: each dominant part names its remedy; warnings when due."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    failed,
    probe_records,
    queue_samples,
    write_probe_dir,
)
from ttftscope.report.verdict import (
    Evidence,
    RunHealth,
    health_findings,
    part_findings,
    verdict,
)
from ttftscope.results.parts import Breakdown, Part
from ttftscope.results.runs import load_runs


def _evidence(
    ttft: float, parts: dict[Part, float], hit_rate: float | None = 0.98, peak: float | None = None
) -> Evidence:
    found = Breakdown(n=20, ttft_ms=ttft, parts=tuple(parts.items()))
    return Evidence("chat", found, 20, hit_rate=hit_rate, peak_waiting=peak)


@pytest.mark.parametrize(
    ("part", "ttft", "value", "hit", "level", "says"),
    [
        (
            "server_frontend",
            640.0,
            410.0,
            0.98,
            "act",
            "is 64% of median TTFT (410 of 640 ms) at a 0.98 prefix hit rate: send token ids — "
            "run `ttftscope gateway`",
        ),
        (
            "queue",
            1000.0,
            400.0,
            0.98,
            "act",
            "queue is 40% of median TTFT (400 of 1,000 ms), up to 12 waiting: the server is "
            "saturated — raise --max-num-seqs or add a replica; not a tokenization problem",
        ),
        (
            "client_tokenize",
            600.0,
            300.0,
            0.98,
            "act",
            "client tokenization is 50% of median TTFT (300 of 600 ms): encode only each new turn "
            "(ttftscope.IncrementalEncoder)",
        ),
        (
            "outside_server",
            800.0,
            500.0,
            0.98,
            "act",
            "outside the server (serialization, network, HTTP) is 62% of median TTFT (500 of "
            "800 ms): the path to the server costs more than the server — keep connections alive",
        ),
        (
            "prefill",
            1000.0,
            700.0,
            0.3,
            "act",
            "prefill is 70% of median TTFT (700 of 1,000 ms) at a 0.30 prefix hit rate: most of "
            "each prompt is computed again — keep the prompt's start stable",
        ),
        (
            "prefill",
            1000.0,
            800.0,
            0.97,
            "ok",
            "prefill is 80% of median TTFT (800 of 1,000 ms) at a 0.97 prefix hit rate: the "
            "model's own work",
        ),
    ],
)
def test_the_dominant_part_names_its_remedy(
    part: Part, ttft: float, value: float, hit: float, level: str, says: str
) -> None:
    findings = part_findings(_evidence(ttft, {part: value}, hit_rate=hit, peak=12.0))
    assert len(findings) == 1
    (f,) = findings
    assert (f.part, f.level) == (part, level)
    assert f.share == pytest.approx(value / ttft)
    assert says in f.text


def test_a_fast_ttft_is_healthy_whatever_its_largest_part() -> None:
    (f,) = part_findings(_evidence(30.0, {"server_frontend": 25.0}))
    assert (
        f.level == "ok"
        and f.text == "median TTFT is 30.0 ms: fast (largest part: server front end, 83%)"
    )


def test_no_dominant_part_is_said_and_small_parts_get_no_remedy() -> None:
    parts: dict[Part, float] = {
        "client_tokenize": 20.0,
        "outside_server": 20.0,
        "server_frontend": 20.0,
        "queue": 20.0,
        "prefill": 20.0,
    }
    (f,) = part_findings(_evidence(100.0, parts))
    assert (
        f.level == "ok"
        and f.text == "no single part dominates TTFT (largest: client tokenization, 20%)"
    )


def test_a_removable_quarter_beside_a_dominant_prefill_gets_its_remedy_too() -> None:
    findings = part_findings(_evidence(100.0, {"server_frontend": 30.0, "prefill": 50.0}))
    assert [(f.part, f.level) for f in findings] == [("prefill", "ok"), ("server_frontend", "act")]
    assert not verdict([]).findings


@pytest.mark.parametrize(
    ("health", "warns"),
    [
        (
            RunHealth("run", requests=200, rate_limited=5),
            ["5 of 200 requests (2.5%) were rate limited (429)"],
        ),
        (RunHealth("run", requests=200, rate_limited=2), []),  # exactly 1%: not more than 1%
        (RunHealth("run", requests=200, rate_limited=0), []),
        (
            RunHealth("run", requests=50, rate_limited=0, flagged=True),
            ["bench flagged this run as contaminated"],
        ),
        (
            RunHealth("run", requests=50, rate_limited=0, overlapped=3),
            ["3 sample(s) overlapped another client's requests"],
        ),
    ],
)
def test_contamination_warns_with_what_to_do(health: RunHealth, warns: list[str]) -> None:
    findings = health_findings(health)
    assert len(findings) == len(warns)
    for f, says in zip(findings, warns, strict=True):
        assert f.level == "warn" and f.text.startswith(says)
    if health.rate_limited > 2 or health.flagged:
        assert "rerun with a separate API key and a lower --request-rate" in findings[0].text


def test_a_healthy_bench_run_gets_no_warning_and_no_remedy(tmp_path: Path) -> None:
    BenchDir(
        records=bench_records(40, Parts(frontend=8.0, prefill=80.0, outside=5.0, hit_rate=0.97)),
        samples=queue_samples(20, waiting_peak=0),
        summary={"run_id": "bench-1", "completed": 40, "failed": 0},
    ).write(tmp_path)
    found = verdict(load_runs([tmp_path]))
    assert found.healthy
    assert [f.level for f in found.findings] == ["ok"]
    assert found.findings[0].subject == "direct" and found.findings[0].part == "prefill"


def test_a_rate_limited_bench_run_leads_with_the_contamination_warning(tmp_path: Path) -> None:
    records = bench_records(100, Parts(queue=5.0, prefill=80.0))
    records += [failed(200 + i, run_id="bench-1", target="direct") for i in range(5)]
    BenchDir(records=records, summary={"run_id": "bench-1"}).write(tmp_path)
    found = verdict(load_runs([tmp_path]))
    assert not found.healthy
    assert found.headline is not None and found.headline.level == "warn"
    assert found.headline.text.startswith("5 of 105 requests (4.8%) were rate limited (429)")


def test_a_saturated_bench_run_says_queue_with_its_peak_and_compares_targets(
    tmp_path: Path,
) -> None:
    records = bench_records(
        30, Parts(queue=300.0, prefill=100.0, frontend=50.0), targets=("direct", "gw")
    )
    BenchDir(records=records, samples=queue_samples(20, waiting_peak=9)).write(tmp_path)
    found = verdict(load_runs([tmp_path]))
    top = found.headline
    assert top is not None and (top.level, top.part, top.subject) == ("act", "queue", "direct")
    assert "up to 9 waiting" in top.text and "not a tokenization problem" in top.text
    assert [f.subject for f in found.findings if f.level == "info"] == ["gw vs direct"]


def test_a_bench_without_per_request_parts_is_judged_on_its_histograms(tmp_path: Path) -> None:
    # under concurrency no request owns a histogram observation: bench records hold the
    # client's view only, and its summary the servers' means over the run
    client_only = {"server_ttft_ms": None, "prefix_hits": None, "prefix_queries": None}
    records = [r.model_copy(update=client_only) for r in bench_records(10, Parts())]
    summary = {
        "run_id": "bench-1",
        "mean_ttft_ms": 900.0,
        "server_mean_ttft_ms": 880.0,
        "server_mean_frontend_ms": 600.0,
        "server_mean_queue_ms": 10.0,
        "server_mean_prefill_ms": 200.0,
        "prefix_hit_rate": 0.99,
    }
    BenchDir(records=records, summary=summary).write(tmp_path)
    (f,) = verdict(load_runs([tmp_path])).findings
    assert (f.level, f.part) == ("act", "server_frontend")
    assert "67% of mean TTFT (600 of 900 ms) at a 0.99 prefix hit rate" in f.text


def test_a_probe_is_judged_at_its_largest_context_with_the_ab_evidence(tmp_path: Path) -> None:
    write_probe_dir(tmp_path, probe_records(sizes=(0, 16000)))
    found = verdict(load_runs([tmp_path]))
    assert [(f.level, f.subject) for f in found.findings] == [
        ("act", "chat at 16,000 tokens"),
        ("info", "token ids instead of text at 16,000 tokens"),
    ]
    assert found.findings[0].part == "server_frontend"
    assert found.findings[1].text == "median TTFT 114 → 33.1 ms (-71%)"


def test_runs_side_by_side_are_named_in_their_findings(tmp_path: Path) -> None:
    write_probe_dir(tmp_path / "p", probe_records(variants=("chat",)))
    BenchDir(records=bench_records(5, Parts()), summary={"label": "nightly"}).write(tmp_path / "b")
    subjects = {f.subject for f in verdict(load_runs([tmp_path / "p", tmp_path / "b"])).findings}
    assert subjects == {"probe-20260101-000000 · chat at 8,000 tokens", "nightly · direct"}


def test_no_successful_request_is_a_warning(tmp_path: Path) -> None:
    BenchDir(
        records=[failed(i, run_id="b", target="direct") for i in range(3)], summary={"run_id": "b"}
    ).write(tmp_path / "b")
    found = verdict(load_runs([tmp_path / "b"]))
    assert [f.level for f in found.findings] == ["warn", "warn"]


def test_a_front_end_that_dominates_through_the_gateway_points_at_the_gateway() -> None:
    found = Breakdown(n=9, ttft_ms=100.0, parts=(("server_frontend", 60.0),))
    (f,) = part_findings(Evidence("gateway", found, 9, hit_rate=0.97, via_gateway=True))
    assert f.level == "act" and "even through the gateway" in f.text
    assert "run `ttftscope gateway`" not in f.text
    assert "ttftscope_gateway_passthrough_total" in f.text


def test_the_queue_finding_uses_the_targets_own_peak_when_the_summary_has_it(
    tmp_path: Path,
) -> None:
    records = bench_records(20, Parts(queue=300.0, prefill=100.0), targets=("direct", "gw"))
    summary: dict[str, object] = {"run_id": "bench-1", "targets": {"direct": {"peak_waiting": 3}}}
    BenchDir(records=records, samples=queue_samples(20, waiting_peak=9), summary=summary).write(
        tmp_path
    )
    found = {f.subject: f.text for f in verdict(load_runs([tmp_path])).findings if f.part}
    assert "up to 3 waiting" in found["direct"] and "up to 9 waiting" in found["gw"]


def test_targets_judged_on_shared_histograms_get_one_finding_not_one_each(
    tmp_path: Path,
) -> None:
    # direct and gateway on one server: its histograms mix both targets' requests, so a
    # per-target verdict would blame the gateway for the direct requests' front end
    client_only = {"server_ttft_ms": None, "prefix_hits": None, "prefix_queries": None}
    records = [
        r.model_copy(update=client_only)
        for r in bench_records(10, Parts(), targets=("direct", "gateway"))
    ]
    summary = {
        "run_id": "bench-1",
        "mean_ttft_ms": 900.0,
        "server_mean_ttft_ms": 880.0,
        "server_mean_frontend_ms": 600.0,
        "server_mean_prefill_ms": 200.0,
    }
    BenchDir(records=records, summary=summary).write(tmp_path)
    parts = [f for f in verdict(load_runs([tmp_path])).findings if f.part is not None]
    (f,) = parts
    assert f.subject == "direct + gateway (run-wide server histograms)"
    assert "even through the gateway" not in f.text
