"""A front end that dominates through the gateway, and a bench judged on its histograms once."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.report.fixtures import BenchDir, Parts, bench_records
from ttftscope.doctor.linefit import fit_line
from ttftscope.doctor.rules.tokenize import server_tokenization_findings
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord, Variant
from ttftscope.results.runs import load_runs

# bench under concurrency: no request owns a histogram observation, records hold the client's
# view only (its summary has the servers' means over the run)
_SERVER_VIEW = ("server_ttft_ms", "queue_ms", "prefill_ms", "server_frontend_ms")
_CLIENT_ONLY = {k: None for k in (*_SERVER_VIEW, "outside_server_ms", "prefix_hits")}
_SLOW = Parts(frontend=600.0, prefill=200.0, queue=10.0, outside=20.0)


def _server(path: Path) -> list[Finding]:
    (run,) = load_runs([path])
    return server_tokenization_findings(run)


def _of(findings: list[Finding], fid: str) -> list[Finding]:
    return [f for f in findings if f.id == fid]


def _client_only(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r.model_copy(update=_CLIENT_ONLY) for r in records]


def test_a_front_end_that_dominates_through_the_gateway_points_at_the_gateway(
    tmp_path: Path,
) -> None:
    recs = bench_records(10, Parts(frontend=60.0, prefill=20.0), targets=("gateway",))
    BenchDir(records=recs).write(tmp_path)
    (f,) = _of(_server(tmp_path), "tokenization-bound")
    assert "even through the gateway (gateway)" in f.title
    assert "ttftscope_gateway_passthrough_total" in f.remedy
    assert "run `ttftscope gateway" not in f.remedy


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
    (f,) = _of(_server(tmp_path), "tokenization-bound")
    assert "67% server front end" in f.title and "direct, run-wide server histograms" in f.title
    assert "600 ms of 900 ms mean TTFT (67%)" in f.evidence[0].fact
    assert "`ttftscope gateway" in f.remedy


_FAST = Parts(frontend=50.0, prefill=200.0, queue=10.0, outside=20.0)


def _server_entry(targets: list[str], front: float) -> dict[str, object]:
    """One server of a bench summary's ``servers`` section, with its run-wide means."""
    return {
        "targets": targets,
        "engine": "vllm-v1",
        "server_requests": 10 * len(targets),
        "server_mean_ttft_ms": front + 210.0,
        "server_mean_frontend_ms": front,
        "server_mean_queue_ms": 10.0,
        "server_mean_prefill_ms": 200.0,
    }


def _two_targets(tmp: Path, gateway: Parts, servers: Mapping[str, object]) -> Path:
    records = _client_only(
        bench_records(10, _SLOW, targets=("direct",))
        + bench_records(10, gateway, targets=("gateway",))
    )
    summary = {
        "run_id": "bench-1",
        "mean_ttft_ms": 600.0,
        "server_mean_ttft_ms": 580.0,
        "server_mean_frontend_ms": 330.0,  # both targets' requests mixed
        "server_mean_prefill_ms": 200.0,
        "server_mean_queue_ms": 10.0,
        "targets": {
            "direct": {"completed": 10, "mean_ttft_ms": 830.0},
            "gateway": {"completed": 10, "mean_ttft_ms": 280.0},
        },
        "servers": servers,
    }
    BenchDir(records=records, summary=summary).write(tmp)
    return tmp


def test_one_server_for_text_and_gateway_traffic_is_judged_by_the_measured_saving(
    tmp_path: Path,
) -> None:
    # direct and gateway reach one vLLM: its histograms mix both targets' requests, so the
    # finding is about the text traffic alone and its saving is what the gateway measured
    shared = {"http://h:8000/metrics": _server_entry(["direct", "gateway"], 330.0)}
    (f,) = _of(_server(_two_targets(tmp_path / "a", _FAST, shared)), "tokenization-bound")
    assert f.title.startswith("TTFT of direct is 550 ms slower sent as text than as ids")
    facts = " ".join(e.fact for e in f.evidence)
    assert "of direct + gateway, from one server's histograms" in facts
    # medians of the fixture's parts: 600+10+202+20 = 832 ms direct, 50+10+202+20 = 282 ms
    assert "median TTFT direct 832 ms vs gateway 282 ms over the whole run" in facts
    assert f.saving_ms == 550.0
    # the gateway measured no faster: the mixed mean is no reason to advise it
    assert not _of(_server(_two_targets(tmp_path / "b", _SLOW, shared)), "tokenization-bound")


def test_targets_with_their_own_servers_are_judged_each_on_its_own(tmp_path: Path) -> None:
    own = {
        "http://h:8000/metrics": _server_entry(["direct"], 600.0),
        "http://h:8001/metrics": _server_entry(["gateway"], 50.0),
    }
    (f,) = _of(_server(_two_targets(tmp_path, _FAST, own)), "tokenization-bound")
    assert "(direct, run-wide server histograms)" in f.title
    assert "600 ms of 830 ms mean TTFT (72%) over 10 requests of direct" in f.evidence[0].fact
    assert f.saving_ms == 600.0


def test_line_fit() -> None:
    fit = fit_line([1.0, 2.0, 3.0, 4.0], [3.0, 5.0, 7.0, 9.5])
    assert fit is not None and 2.0 < fit.slope < 2.3 and fit.r2 > 0.99
    assert fit_line([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_the_text_vs_ids_saving_is_the_servers_not_the_clients_tokenization(
    tmp_path: Path,
) -> None:
    from tests.report.fixtures import record, write_probe_dir
    from ttftscope.doctor.rules.tokenize import client_tokenization_findings

    # chat: the client tokenized for 200 ms; text vs ids: ids saved the server 160 ms
    recs: list[RequestRecord] = []
    for size in (2000, 16000, 32000):
        grow = size / 32000
        chat = Parts(frontend=10.0, prefill=20.0, tokenize=200.0 * grow)
        text = Parts(frontend=170.0 * grow, prefill=20.0)
        ids = Parts(frontend=10.0 * grow, prefill=20.0)
        variants: tuple[tuple[Variant, Parts], ...] = (("chat", chat), ("text", text), ("ids", ids))
        for variant, parts in variants:
            recs += [
                record(len(recs), parts, variant=variant, phase="warm", size=size) for _ in range(3)
            ]
    write_probe_dir(tmp_path, recs)
    (run,) = load_runs([tmp_path])
    (client,) = _of(client_tokenization_findings(run), "tokenization-bound")
    assert client.saving_ms == 200.0  # its own time, not the server's 160 ms
    assert not any("text" in e.fact and "vs ids" in e.fact for e in client.evidence)
