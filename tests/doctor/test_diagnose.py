"""The doctor's rules on result directories written as probe and bench write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.fixtures import BenchDir, Parts, failed, probe_records, record, write_probe_dir
from ttftscope.config.loader import load_settings
from ttftscope.doctor.diagnose import Inputs, diagnose
from ttftscope.doctor.gather import Live, read_recorded
from ttftscope.doctor.sampling import Gauges, LiveSamples
from ttftscope.doctor.serverfacts import ServerFacts
from ttftscope.findings import Diagnosis
from ttftscope.records import RequestRecord, Variant


def _diagnose(paths: list[Path], tmp: Path, live: Live | None = None) -> Diagnosis:
    loaded = load_settings(env={"HOME": str(tmp)}, cwd=tmp)
    return diagnose(Inputs(loaded=loaded, cwd=tmp, recorded=read_recorded(paths), live=live))


def _ids(d: Diagnosis) -> list[str]:
    return [f.id for f in d.findings]


def test_a_healthy_probe_gives_no_warning(tmp_path: Path) -> None:
    # small contexts: the front end stays a few ms, far from dominating
    write_probe_dir(tmp_path / "p", probe_records(sizes=(0, 1000), variants=("chat",)))
    d = _diagnose([tmp_path / "p"], tmp_path)
    assert d.findings == [] and d.exit_code == 0
    assert any("request records" in c for c in d.checked)


def test_front_end_growing_with_context_is_named_with_slope_share_and_saving(
    tmp_path: Path,
) -> None:
    recs = probe_records(sizes=(0, 8000, 16000), variants=("chat", "text", "ids"))
    write_probe_dir(tmp_path / "p", recs)
    d = _diagnose([tmp_path / "p"], tmp_path)
    tok = [f for f in d.findings if f.id == "tokenization-bound"]
    assert tok and d.exit_code == 1
    (chat,) = tok  # one per run: the worst of the series the server tokenizes
    assert "(chat)" in chat.title
    facts = " ".join(e.fact for e in chat.evidence)
    # fixtures: front end 3 + size/200 ms → 5 ms per 1K tokens
    assert "5.00 ms per 1K tokens" in facts and "hit rate 0.95" in facts
    assert "vs ids" in facts and chat.saving_ms is not None and chat.saving_ms > 70
    assert "gateway" in chat.remedy


def _slow_prefill_sweep(variants: tuple[Variant, ...]) -> list[RequestRecord]:
    """A sweep on a slow machine: the front end grows to ~80 ms as text, but prefill makes
    TTFT so long that its share stays under 20%."""
    out: list[RequestRecord] = []
    for size in (2000, 16000, 32000):
        for variant in variants:
            front = 2.0 if variant == "ids" else 3.0 + size / 400
            for k in range(3):
                parts = Parts(frontend=front + k, prefill=400.0 + k, hit_rate=0.95)
                out.append(record(len(out), parts, variant=variant, size=size))
    return out


def test_a_measured_text_vs_ids_saving_is_a_finding_whatever_its_share(tmp_path: Path) -> None:
    write_probe_dir(tmp_path / "ab", _slow_prefill_sweep(("text", "ids")))
    d = _diagnose([tmp_path / "ab"], tmp_path)
    (tok,) = [f for f in d.findings if f.id == "tokenization-bound"]
    facts = " ".join(e.fact for e in tok.evidence)
    assert "(17%)" in facts and "median TTFT text 495 ms vs ids 414 ms" in facts
    assert tok.saving_ms == pytest.approx(81.0)
    # the same share without an ids series to measure the saving against: not evidence
    write_probe_dir(tmp_path / "text", _slow_prefill_sweep(("text",)))
    d = _diagnose([tmp_path / "text"], tmp_path)
    assert "tokenization-bound" not in _ids(d)


def _queued_bench(tmp: Path, waiting: float) -> Path:
    recs = [
        record(i, Parts(queue=300.0 if waiting else 0.0), run_id="bench-1", target="direct")
        for i in range(10)
    ]
    samples: list[dict[str, object]] = [
        {"t_s": i * 0.25, "running": 2, "waiting": waiting if i % 2 else 0, "targets": ["direct"]}
        for i in range(20)
    ]
    summary = {
        "run_id": "bench-1",
        "completed": 10,
        "server_mean_queue_ms": 300.0 if waiting else 0,
    }
    BenchDir(records=recs, samples=samples, summary=summary).write(tmp / "b")
    return tmp / "b"


def test_queueing_names_the_share_the_running_count_and_says_not_tokenization(
    tmp_path: Path,
) -> None:
    d = _diagnose([_queued_bench(tmp_path, 3)], tmp_path)
    (q,) = [f for f in d.findings if f.id == "queueing"]
    facts = " ".join(e.fact for e in q.evidence)
    assert "50% of 20 /metrics samples" in facts and "peak 3 waiting while 2 ran" in facts
    assert "--max-num-seqs 5" in q.remedy and "not a tokenization problem" in q.remedy
    # said first: the saving printed after the remedy belongs to the queue's fix
    assert q.remedy.startswith("not a tokenization problem (token ids will not fix it): ")
    assert q.remedy.endswith("otherwise add a replica")
    assert q.saving_ms == 300.0


def test_the_queue_remedy_uses_the_live_servers_own_limit(tmp_path: Path) -> None:
    server = ServerFacts(source="http://h/metrics", engine="vllm-v1", max_num_seqs=2)
    d = _diagnose([_queued_bench(tmp_path, 3)], tmp_path, Live(server=server))
    (q,) = [f for f in d.findings if f.id == "queueing"]
    assert "its --max-num-seqs 2 (from /server_info)" in q.remedy
    assert "--max-num-seqs 5 or more" in q.remedy and "cannot be seen" not in q.remedy


def test_no_queue_no_queue_finding(tmp_path: Path) -> None:
    assert "queueing" not in _ids(_diagnose([_queued_bench(tmp_path, 0)], tmp_path))


def test_rate_limits_inside_a_measurement_are_flagged(tmp_path: Path) -> None:
    recs = [*probe_records(sizes=(0,), variants=("chat",)), failed(99, retry_after="2")]
    write_probe_dir(tmp_path / "p", recs)
    d = _diagnose([tmp_path / "p"], tmp_path)
    (rl,) = [f for f in d.findings if f.id == "rate-limited"]
    facts = " ".join(e.fact for e in rl.evidence)
    assert "1 of" in facts and "answered 429" in facts and "Retry-After asked for: 2" in facts
    assert "separate API key" in rl.remedy


def test_prefix_cache_off_from_live_metrics(tmp_path: Path) -> None:
    live = Live(
        server=ServerFacts(
            source="http://h/metrics", engine="vllm-v1", prefix_caching=False, block_size=16
        )
    )
    d = _diagnose([], tmp_path, live)
    (off,) = [f for f in d.findings if f.id == "prefix-cache-off"]
    assert "enable_prefix_caching" in off.evidence[0].fact
    assert "--enable-prefix-caching" in off.remedy


def test_cold_cache_on_repeated_prefixes_from_records(tmp_path: Path) -> None:
    recs = [record(i, Parts(hit_rate=0.0), size=8000) for i in range(4)]
    write_probe_dir(tmp_path / "p", recs)
    d = _diagnose([tmp_path / "p"], tmp_path)
    assert "prefix-cache-off" in _ids(d)


def test_request_logs_beside_records_are_found_and_not_read_as_records(tmp_path: Path) -> None:
    write_probe_dir(tmp_path / "p", probe_records(sizes=(0,), variants=("chat",)))
    (tmp_path / "p" / "requests.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    got = read_recorded([tmp_path / "p"])
    assert got.request_logs == [tmp_path / "p" / "requests.jsonl"]
    assert not any("requests.jsonl" in n for n in got.notes)


def test_missing_records_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist"):
        read_recorded([tmp_path / "nope"])


def _live_queue(waiting: list[float]) -> Live:
    gauges = tuple(Gauges(waiting=w, running=2) for w in waiting)
    server = ServerFacts(source="http://h/metrics", engine="vllm-v1", waiting=waiting[0])
    samples = LiveSamples("http://h/metrics", 5.0, gauges, mean_queue_ms=150.0, finished=4)
    return Live(server=server, samples=samples)


def test_a_live_queue_alone_is_the_queueing_finding(tmp_path: Path) -> None:
    d = _diagnose([], tmp_path, _live_queue([6] * 11))
    (q,) = [f for f in d.findings if f.id == "queueing"]
    assert q.evidence[0].source == "http://h/metrics" and q.saving_ms == 150.0
    assert d.exit_code == 1


def test_a_live_queue_and_a_recorded_one_are_one_finding_with_both_evidences(
    tmp_path: Path,
) -> None:
    d = _diagnose([_queued_bench(tmp_path, 3)], tmp_path, _live_queue([6] * 11))
    (q,) = [f for f in d.findings if f.id == "queueing"]
    sources = {e.source for e in q.evidence}
    assert "http://h/metrics" in sources and any(s.endswith("b") for s in sources)
    assert q.saving_ms == 300.0  # the records' measured queue time


def test_a_glimpse_of_a_queue_is_a_note_that_states_the_rule(tmp_path: Path) -> None:
    d = _diagnose([], tmp_path, _live_queue([0, 0, 6, 0, 0]))
    assert "queueing" not in _ids(d)
    assert any("above 0 in 1 of 5 /metrics scrapes" in n and "at least 50%" in n for n in d.notes)


def test_one_scrape_with_requests_waiting_asks_for_a_window(tmp_path: Path) -> None:
    server = ServerFacts(source="http://h/metrics", engine="vllm-v1", waiting=6)
    d = _diagnose([], tmp_path, Live(server=server))
    assert "queueing" not in _ids(d)
    assert any("one /metrics scrape showed 6 waiting" in n for n in d.notes)
