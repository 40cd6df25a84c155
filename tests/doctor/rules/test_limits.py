"""The queue's remedy: the server's own limit where it can be read, never the workload's."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import BenchDir, Parts, bench_records
from ttftscope.doctor.rules.limits import UNREAD, queue_remedy
from ttftscope.doctor.rules.server import queue_findings
from ttftscope.findings import Finding
from ttftscope.results.runs import Run, load_runs

_QUEUED = Parts(queue=300.0)


def _bench(tmp: Path, states: list[tuple[int, int]], sessions: int = 4, kv: float = 0.4) -> Run:
    """A bench of ``sessions`` sessions whose sampler saw (running, waiting) in turn."""
    samples: list[dict[str, object]] = [
        {"t_s": i * 0.25, "running": r, "waiting": w, "kv_cache_usage": kv, "targets": ["direct"]}
        for i, (r, w) in enumerate(states)
    ]
    recs = bench_records(12, _QUEUED, sessions=sessions)
    BenchDir(records=recs, samples=samples, summary={"run_id": "bench-1"}).write(tmp)
    (run,) = load_runs([tmp])
    return run


def _queue(run: Run, limit: int | None = None) -> Finding:
    (found,) = queue_findings([run], limit)
    return found


def test_the_workloads_own_sessions_are_not_taken_for_the_servers_limit(tmp_path: Path) -> None:
    # 4 sessions: the server ran all 4 at once, and one waited only while 3 ran
    run = _bench(tmp_path, [(4, 0), (3, 1), (4, 0), (3, 1), (2, 0)] * 4)
    remedy = _queue(run).remedy
    assert "--max-num-seqs 5" not in remedy and "start it with --max-num-seqs" not in remedy
    assert "4 is the workload's own concurrency, its 4 sessions" in remedy
    assert "fewer than the 4 it ran at other times" in remedy
    assert "the KV cache had room (usage peaked at 40%)" in remedy
    assert "the tokens per step (--max-num-batched-tokens) held them back" in remedy


def test_a_server_at_its_limit_while_requests_wait_is_told_to_raise_it(tmp_path: Path) -> None:
    # 8 sessions, the server never ran more than 2 and requests waited meanwhile
    run = _bench(tmp_path, [(2, 3), (2, 6), (2, 1), (1, 0)] * 5, sessions=8)
    unread = _queue(run).remedy
    assert "the server ran at most 2 at once while requests waited" in unread
    assert UNREAD in unread and "start it with --max-num-seqs 8 or more" in unread
    # its limit read from /server_info: named as such, and not said to be unreadable
    read = _queue(run, limit=2).remedy
    assert "its --max-num-seqs 2 (from /server_info)" in read and UNREAD not in read
    assert "start it with --max-num-seqs 8 or more" in read


def test_requests_held_below_a_known_limit_point_at_the_kv_cache(tmp_path: Path) -> None:
    run = _bench(tmp_path, [(2, 3), (2, 6), (2, 1), (1, 0)] * 5, sessions=8)
    remedy = _queue(run, limit=256).remedy
    assert "requests waited while 2 ran, below its --max-num-seqs 256" in remedy
    assert "start it with" not in remedy and "--max-num-batched-tokens" in remedy


def test_a_full_kv_cache_is_named_as_what_held_requests(tmp_path: Path) -> None:
    run = _bench(tmp_path, [(4, 0), (3, 1), (2, 0)] * 4, kv=0.95)
    remedy = _queue(run).remedy
    assert (
        "a full KV cache (usage peaked at 95%)" in remedy and "--gpu-memory-utilization" in remedy
    )
    assert "--max-num-batched-tokens" not in remedy


def test_without_samples_the_remedy_says_what_it_could_not_read() -> None:
    remedy = queue_remedy(Run(kind="probe", key="k", label="p", parts=()), None)
    assert UNREAD in remedy and "no /metrics samples" in remedy
