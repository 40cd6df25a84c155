"""Ping and probe against real vLLM; assert relations, never absolute latencies."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttftscope.cli import cli
from ttftscope.client.endpoint import Endpoint
from ttftscope.localstate import LocalServer
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.probe.summary import summarize_probe
from ttftscope.records import RecordWriter, RequestRecord, read_records
from ttftscope.stats import median

pytestmark = pytest.mark.e2e


def _endpoint(server: LocalServer) -> Endpoint:
    return Endpoint(
        base_url=server.base_url,
        metrics_url=server.root_url + "/metrics",
        model=server.model,
        timeout_s=300,
    )


def test_ping_reports_base_url_and_model(vllm: LocalServer) -> None:

    result = CliRunner().invoke(cli, ["ping", "--base-url", vllm.base_url], env={})
    assert result.exit_code == 0, result.output
    assert vllm.base_url in result.output
    assert f"model={vllm.model}" in result.output


@pytest.fixture(scope="module")
def probe_records(
    vllm: LocalServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[RequestRecord], Path]:
    path = tmp_path_factory.mktemp("probe") / "records.jsonl"
    opts = ProbeOptions(context_tokens=(0, 8000, 16000), repeat=3, num_warmups=1, ab="ids")
    with RecordWriter(path) as writer:
        run = asyncio.run(run_probe(_endpoint(vllm), opts, writer=writer))
    return run.records, path


def test_every_request_succeeds_and_is_recorded(
    probe_records: tuple[list[RequestRecord], Path],
) -> None:
    records, path = probe_records
    assert records and all(r.ok for r in records)
    on_disk = read_records(path)
    assert [r.index for r in on_disk] == [r.index for r in records]


def test_consistency_checks_hold_on_every_sample(
    probe_records: tuple[list[RequestRecord], Path],
) -> None:
    records, _ = probe_records
    for r in records:
        assert not r.contaminated, r.notes
        assert set(r.checks) == {
            "server_ttft_le_client",
            "queue_prefill_le_server_ttft",
            "one_observation_each",
        }, r
        assert all(r.checks.values()), (r.index, r.checks, r.notes)
        assert r.server_ttft_ms is not None and r.wire_ttft_ms is not None
        assert r.server_ttft_ms <= r.wire_ttft_ms + 1.0


@pytest.mark.parametrize("size", [8000, 16000])
def test_warm_prefix_hit_rate_is_high(
    probe_records: tuple[list[RequestRecord], Path], size: int
) -> None:
    records, _ = probe_records
    chat = [r for r in records if r.variant == "chat" and r.context_tokens_target == size]
    cold = next(r for r in chat if r.phase == "cold")
    warm = [r for r in chat if r.phase == "warm"]
    assert cold.prefix_hit_rate is not None and cold.prefix_hit_rate < 0.5
    assert warm and all(r.prefix_hit_rate is not None and r.prefix_hit_rate > 0.9 for r in warm)
    # what the cache saves shows up where it should: prefill, not the front end
    warm_prefill = median(r.prefill_ms for r in warm)
    assert warm_prefill is not None and warm_prefill < (cold.prefill_ms or 0)


def test_ab_text_front_end_costs_more_than_ids(
    probe_records: tuple[list[RequestRecord], Path],
) -> None:
    records, _ = probe_records
    summary = summarize_probe(records, model="m", base_url="b")
    text_fe = summary["ab_text_median_server_frontend_ms"]
    assert text_fe > summary["ab_ids_median_server_frontend_ms"]
    for size in (8000, 16000):
        text = [
            r.prompt_tokens
            for r in records
            if r.variant == "text" and r.context_tokens_target == size
        ]
        ids = [
            r.prompt_tokens
            for r in records
            if r.variant == "ids" and r.context_tokens_target == size
        ]
        # same kind of prompt both ways: one shared context plus a fresh turn of equal length
        assert abs(median(text) - median(ids)) <= 0.02 * median(ids)  # type: ignore[operator]


def test_probe_cli_json_summary(vllm: LocalServer, tmp_path: Path) -> None:

    result = CliRunner().invoke(
        cli,
        [
            "probe",
            "--base-url",
            vllm.base_url,
            "--repeat",
            "2",
            "--num-warmups",
            "0",
            "--json",
            "--result-dir",
            str(tmp_path),
        ],
        env={},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["completed"] == 3 and summary["failed"] == 0
    assert summary["median_ttft_ms"] >= summary["median_server_ttft_ms"]
    assert len(read_records(Path(summary["records_path"]))) == 3
