"""``ttftscope bench`` on the real local vLLM: direct and through the token-id gateway.

One scaled run (4 sessions, contexts at 5% of 86K-123K tokens) is shared by the tests of
this module. The waiting queue under more sessions than ``--max-num-seqs`` is checked on a
constrained second server in ``test_doctor.py``, where the doctor reads the same run.
Each run takes a fresh seed, so its first turns are cold even on a server an earlier run
warmed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from ttftscope.bench.observe.sampler import ScrapeSample
from ttftscope.bench.options import BenchOptions, TargetSpec
from ttftscope.bench.runner import BenchRun, run_bench
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.schema import GatewaySettings, UpstreamSettings, derive_metrics_url
from ttftscope.findings import Diagnosis
from ttftscope.gateway.serve import BackgroundGateway
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.records import read_records_report
from ttftscope.report.html import render_html
from ttftscope.results.request_parts import REQUEST_PARTS
from ttftscope.results.runs import load_runs
from ttftscope.results.summaries import BenchSummary

pytestmark = pytest.mark.e2e

SESSIONS = 4
PROMPTS = 16


@pytest.fixture(scope="module")
def bench_run(vllm: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BenchRun]:
    upstream = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())
    with BackgroundGateway(GatewaySettings(upstreams={"local": upstream})) as gw:
        ep = Endpoint(
            base_url=vllm.base_url,
            metrics_url=derive_metrics_url(vllm.base_url),
            model=vllm.model,
            timeout_s=300,
            max_tokens=4,
        )
        opts = BenchOptions(
            sessions=SESSIONS,
            scale=0.05,
            num_prompts=PROMPTS,
            think_time_s=0.05,
            seed=time.time_ns() % 2**32,
            targets=(TargetSpec("direct"), TargetSpec("gateway", gw.base_url)),
            duration_s=150,
            max_tokens=4,  # short answers: the bench's own default is the traces' 216
            # no compaction: with a random seed, 1 run in ~9 would shrink a session's context
            # below the sizes asserted here (compaction has its own unit tests)
            compaction_share=0.0,
        )
        result_dir = tmp_path_factory.mktemp("bench")
        yield asyncio.run(run_bench(ep, opts, result_dir=result_dir))


def test_a_bench_direct_and_through_the_gateway_completes(bench_run: BenchRun) -> None:
    s = bench_run.summary
    assert bench_run.abort is None and s["failed"] == 0, s["failures"]
    assert s["completed"] == PROMPTS and s["cold_requests"] == SESSIONS
    for name in ("direct", "gateway"):
        target = s["targets"][name]
        assert target["completed"] == PROMPTS // 2
        assert target["median_ttft_ms"] > 0 and target["p99_ttft_ms"] >= target["median_ttft_ms"]
        assert target["median_tpot_ms"] > 0 and target["median_itl_ms"] > 0
    assert s["context_tokens"] == "4300-6150" and s["mean_ttft_ms"] < s["mean_e2el_ms"]


def test_the_summary_and_the_records_validate(bench_run: BenchRun) -> None:
    BenchSummary.validate_written(json.loads(bench_run.files.summary.read_text()))
    got = read_records_report(bench_run.files.records)
    assert got.skipped == 0 and len(got.records) == PROMPTS + 2  # one warmup per target
    measured = [r for r in got.records if r.phase != "warmup"]
    assert {(r.session, r.turn) for r in measured} == {
        (s, t) for s in range(SESSIONS) for t in range(PROMPTS // SESSIONS)
    }
    assert all(r.ok and r.prompt_tokens and r.prompt_tokens > 4000 for r in measured)
    # every turn after the first extends its own conversation: the server finds it cached
    warm = [r for r in measured if r.phase == "warm"]
    assert (
        all((r.cached_tokens or 0) > 0 for r in warm) or bench_run.summary["prefix_hit_rate"] > 0.5
    )


def test_the_servers_metrics_were_sampled_and_aggregated(bench_run: BenchRun) -> None:
    s = bench_run.summary
    lines = bench_run.files.samples.read_text().splitlines()
    samples = [ScrapeSample.model_validate_json(line) for line in lines]
    engines = {x.engine for x in samples if x.ok}
    assert {"vllm-v1", "unknown"} <= engines  # the server, and the gateway's own metrics
    assert s["server_requests"] >= PROMPTS  # the gateway's requests reach the same server
    assert s["server_mean_prefill_ms"] > 0 and s["server_mean_ttft_ms"] > 0
    assert s["prefix_hit_rate"] > 0.3
    gateway = next(v for v in s["servers"].values() if v["targets"] == ["gateway"])
    assert gateway["gateway"]["ttftscope_gateway_requests_total"] == PROMPTS // 2
    assert any(x.gateway.get("ttftscope_gateway_requests_total") for x in samples)


def test_the_summary_has_per_bucket_parts_and_the_report_draws_them(
    bench_run: BenchRun,
) -> None:
    """Schema 2's groups cover every measured request; the page has their table (or says
    why not) and the slowest and the median request's waterfall."""
    s = json.loads(bench_run.files.summary.read_text())
    assert s["schema_version"] == 2
    groups = s["parts_by_bucket"]
    for name in ("direct", "gateway"):
        mine = [g for g in groups if g["target"] == name]
        assert sum(g["requests"] for g in mine) == s["targets"][name]["completed"]
    for g in groups:
        for part in REQUEST_PARTS:
            sources = g[f"{part}_sources"]
            assert set(sources) <= {"span", "histogram"}
            assert sum(sources.values()) == g[f"{part}_requests"] <= g["requests"]
    page = render_html(load_runs([bench_run.files.summary.parent]), Diagnosis(), generated="t")
    assert "id='request-parts'" in page or "no request has its own parts" in page
    assert 'id="waterfall"' in page and "slowest request: #" in page
