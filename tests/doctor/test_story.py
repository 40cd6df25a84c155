"""One story: each remedy once, queueing only when it costs, a slope only from a fit that
holds, prefill named when it dominates (issue 35, "One story")."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    queue_samples,
    record,
    write_probe_dir,
)
from ttftscope.config.loader import load_settings
from ttftscope.doctor.diagnose import Inputs, diagnose
from ttftscope.doctor.gather import read_recorded
from ttftscope.doctor.story import one_story
from ttftscope.findings import Diagnosis, Evidence, Finding


def _diagnose(*paths: Path) -> Diagnosis:
    loaded = load_settings(env={}, cwd=paths[0])
    return diagnose(Inputs(loaded=loaded, cwd=paths[0], recorded=read_recorded(list(paths))))


def _of(d: Diagnosis, fid: str) -> list[Finding]:
    return [f for f in d.findings if f.id == fid]


def test_the_same_remedy_in_three_runs_is_one_finding_with_the_largest_saving(
    tmp_path: Path,
) -> None:
    # the demo's three "run the gateway on the server's host" warnings
    for k, outside in enumerate((300.0, 500.0, 400.0)):
        recs = bench_records(10, Parts(outside=outside), targets=("gateway",), run_id=f"b{k}")
        BenchDir(records=recs, summary={"run_id": f"b{k}"}).write(tmp_path / f"run{k}")
    (f,) = _of(_diagnose(tmp_path), "network-path")
    assert f.saving_ms == 500.0
    assert len(f.evidence) == 3 and f.title.endswith("(and 2 more like it)")


def test_one_waiting_request_in_a_four_session_run_is_no_alarm(tmp_path: Path) -> None:
    # "peak 1 waiting while 4 ran" with a queue time of 1 ms: seen, but it costs nothing
    recs = bench_records(20, Parts(queue=1.0, outside=5.0), sessions=4)
    samples = queue_samples(20, waiting_peak=1)
    for k, sample in enumerate(samples):
        sample["waiting"] = 1 if k % 3 == 0 else 0  # a third of the scrapes saw one waiting
    BenchDir(records=recs, samples=samples).write(tmp_path)
    found = _diagnose(tmp_path)
    (q,) = _of(found, "queueing")
    assert q.severity == "info" and q.saving_ms is None
    assert "the time it cost: 1 ms per request" in q.title
    assert found.healthy


def test_a_queue_too_small_to_matter_advises_no_flag_and_two_runs_say_it_once(
    tmp_path: Path,
) -> None:
    # the demo: two benches of one server, each "peak 1 waiting while 3 ran" at a few ms in
    # queue, advised --max-num-seqs in one finding and --max-num-batched-tokens in the other
    for k, name in enumerate(("chat", "messages")):
        recs = bench_records(20, Parts(queue=2.0 + k, outside=5.0), sessions=4, run_id=name)
        samples = queue_samples(20, waiting_peak=1)
        for i, sample in enumerate(samples):
            sample["waiting"] = 1 if i % 3 == 0 else 0
            sample["running"] = 3 if i % 3 == 0 else 4 - k
        BenchDir(records=recs, samples=samples).write(tmp_path / name)
    (q,) = _of(_diagnose(tmp_path), "queueing")
    assert q.severity == "info" and q.saving_ms is None
    assert q.remedy.startswith("nothing to change: the time in queue per request is under")
    assert "--max-num" not in q.remedy


def test_a_queue_that_costs_is_a_warning_with_its_interval(tmp_path: Path) -> None:
    recs = bench_records(20, Parts(queue=250.0), sessions=4)
    BenchDir(records=recs, samples=queue_samples(20, waiting_peak=6)).write(tmp_path)
    (q,) = _of(_diagnose(tmp_path), "queueing")
    assert q.severity == "warning" and q.saving_ms == 250.0
    facts = [e.fact for e in q.evidence]
    assert "median queue time per request 250 ms (95% interval 250 to 250 ms, 20 requests)" in (
        facts
    )


def _frontend_probe(tmp_path: Path, frontends: dict[int, list[float]]) -> Finding:
    recs = [
        record(i, Parts(frontend=fe, prefill=10.0, outside=2.0), size=size)
        for i, (size, fe) in enumerate((s, fe) for s, fes in frontends.items() for fe in fes)
    ]
    write_probe_dir(tmp_path, recs)
    (f,) = _of(_diagnose(tmp_path), "tokenization-bound")
    return f


def test_a_slope_is_stated_only_when_the_line_fits(tmp_path: Path) -> None:
    # the "grows 169 ms per 1K tokens (r² 0.29)" beside a part of 84 ms: noise
    noisy = _frontend_probe(tmp_path / "a", {2000: [20.0, 400.0, 30.0], 6000: [84.0, 80.0, 90.0]})
    assert not any("grows" in e.fact for e in noisy.evidence)
    assert "grows with context" not in noisy.title


def test_a_slope_that_fits_is_stated(tmp_path: Path) -> None:
    # 40 ms per 1K tokens, exactly: 2,500 → 100 ms, 8,500 → 340 ms (prompt = size + 500)
    fits = _frontend_probe(tmp_path, {2000: [100.0] * 3, 8000: [340.0] * 3})
    assert "grows 40.00 ms per 1K tokens (line fit, r² 1.00)" in [e.fact for e in fits.evidence]
    assert fits.title.endswith("and grows with context")


def test_prefill_that_dominates_with_the_cache_working_is_its_own_finding(tmp_path: Path) -> None:
    recs = [record(i, Parts(frontend=5.0, prefill=400.0, hit_rate=0.9)) for i in range(4)]
    write_probe_dir(tmp_path, recs)
    found = _diagnose(tmp_path)
    (f,) = _of(found, "prefill-bound")
    assert f.severity == "info" and "max-num-batched-tokens" in f.remedy
    # 8,500-token prompts, 0.9 cached: 850 uncached tokens in 400 ms
    assert "~850 uncached tokens per request: 470.6 ms per 1K computed tokens" in (
        f.evidence[1].fact
    )


def test_a_cache_miss_is_folded_into_the_dynamic_prefix_that_causes_it() -> None:
    cause = Finding(
        id="dynamic-prefix", severity="warning", title="the prompt changes early", remedy="a"
    )
    missed = Finding(
        id="prefix-cache-off",
        severity="warning",
        title="prefill is 98% of TTFT",
        remedy="b",
        saving_ms=365.0,
        part_ms=380.0,
        evidence=[Evidence(fact="median prefill 380 ms", source="p.jsonl")],
    )
    (one,) = one_story([missed, cause])
    assert one.id == "dynamic-prefix" and one.saving_ms == 365.0 and one.part_ms == 380.0
    assert [e.fact for e in one.evidence] == ["median prefill 380 ms"]
    # the cache switched off is its own cause: no saving measured, nothing folded
    off = missed.model_copy(update={"saving_ms": None})
    assert [f.id for f in one_story([off, cause])] == ["prefix-cache-off", "dynamic-prefix"]
