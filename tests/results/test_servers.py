"""A bench's servers: which targets' requests each one's histograms hold."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import BenchDir, Parts, bench_records
from ttftscope.report.timeline import queue_timelines
from ttftscope.results.runs import Run, load_runs
from ttftscope.results.servers import server_figures

_VLLM = "http://127.0.0.1:8000/metrics"
_GATEWAY = "http://127.0.0.1:8100/metrics"


def _entry(targets: list[str], served: float | None, engine: str = "vllm-v1") -> dict[str, object]:
    return {
        "targets": targets,
        "engine": engine,
        "server_requests": served,
        "server_mean_ttft_ms": 100.0 if served else None,
        "server_mean_frontend_ms": 40.0 if served else None,
        "server_mean_queue_ms": 0.0 if served else None,
        "server_mean_prefill_ms": 60.0 if served else None,
    }


def _run(tmp: Path, served: float) -> Run:
    """A bench as it is written with a gateway target: the vLLM listed under ``direct``
    alone (bench reads each target's /metrics at its own address), the gateway under its own
    /metrics, which is no inference server."""
    samples: list[dict[str, object]] = [
        {"t_s": k * 0.25, "source": _VLLM, "targets": ["direct"], "waiting": k % 2, "running": 2}
        for k in range(8)
    ]
    BenchDir(
        records=bench_records(8, Parts(), targets=("direct", "gateway")),
        samples=samples,
        summary={
            "run_id": "b",
            "targets": {t: {"completed": 8, "mean_ttft_ms": 120.0} for t in ("direct", "gateway")},
            "servers": {
                _VLLM: _entry(["direct"], served),
                _GATEWAY: _entry(["gateway"], None, "unknown"),
            },
        },
    ).write(tmp)
    (run,) = load_runs([tmp])
    return run


def test_a_gateway_targets_requests_counted_by_the_vllm_behind_it_put_it_behind_it(
    tmp_path: Path,
) -> None:
    (server,) = server_figures(_run(tmp_path, served=16))
    assert server.targets == ("direct", "gateway") and server.shared and server.others == 0
    assert server.breakdown is not None and server.breakdown.n == 16
    # the timeline of that server is named by the same targets as its bar
    assert [line.name for line in queue_timelines(_run(tmp_path / "t", served=16))] == [
        "direct + gateway"
    ]


def test_requests_nobody_in_the_run_sent_are_counted_as_others(tmp_path: Path) -> None:
    (server,) = server_figures(_run(tmp_path, served=40))
    assert server.targets == ("direct",) and not server.shared
    assert server.others == 32  # 40 served, 8 sent by direct; the gateway's 8 do not explain it


def test_a_probe_has_no_server_figures(tmp_path: Path) -> None:
    assert server_figures(Run(kind="probe", key="k", label="p", parts=())) == []
