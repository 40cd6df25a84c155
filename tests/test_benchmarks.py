"""The benchmark scripts run end to end (small sizes) and print the promised JSON fields."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tokenizer_fixtures.fixtures import build_all

ROOT = Path(__file__).parent.parent
FIELDS = {
    "tokenizer",
    "context_tokens",
    "appends",
    "full_ms_median",
    "incremental_ms_median",
    "append_only_ms_median",
    "speedup",
    "overhead_vs_append_only",
    "mismatches",
    "bytes_per_cached_token",
}


def _last_json_line(script: str, args: list[str], *, timeout_s: float) -> dict[str, Any]:
    """Run ``benchmarks/script`` with ``args``; the JSON object on its last output line."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("script", ["incremental_append.py", "chat_session.py"])
def test_benchmark_prints_one_json_line_with_every_field(script: str) -> None:
    args = ["--tokenizer", "cl100k", "--appends", "3", "--tokens", "3000"]
    result = _last_json_line(script, args, timeout_s=600)
    assert result.keys() >= FIELDS
    assert result["appends"] == 3 and result["mismatches"] == 0
    assert result["bytes_per_cached_token"] <= 16


def test_the_hop_benchmark_measures_both_modes_against_a_trivial_upstream() -> None:
    qwen2_dir = build_all(["qwen2"])["qwen2"]  # a real tokenizer and chat template, offline
    args = ["--pairs", "20", "--model-dir", str(qwen2_dir)]
    result = _last_json_line("gateway_hop.py", args, timeout_s=300)
    assert result["ids_api"] == "chat-ids" and result["pairs"] == 20
    for mode in ("ids", "text"):
        # the gateway costs something (how much is the benchmark's figure, not a pass/fail bound)
        assert result[f"{mode}_overhead_ms_paired_p50"] > 0


def test_the_soak_benchmark_reports_what_the_gateway_adds_memory_and_mismatches() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gateway_soak.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    phases = {line["phase"]: line for line in lines if "phase" in line}
    assert phases.keys() == {"idle", "cold", "churn"}
    for phase in phases.values():  # paired: both sides of every pair timed
        assert phase["pairs"] > 0 and phase["gateway_failed"] == phase["direct_failed"] == 0
        added = phase["gateway_p99_ms"] - phase["direct_p99_ms"]
        assert phase["gateway_added_p99_ms"] == pytest.approx(added, abs=0.011)
    result = lines[-1]
    promised = {
        "gateway_added_p99_idle_ms",
        "gateway_added_p99_cold_ms",
        "mb_per_100k_conversation",
        "rss_over_cache_mb",
        "mismatches",
    }
    assert result.keys() >= promised
    assert result["mismatches"] == 0 and result["verified_requests"] > 0
    assert result["small_chat_pairs"]["cold"] == phases["cold"]["pairs"]
    assert result["cold_conversations"] > 0 and result["mb_per_100k_conversation"] > 0


def _soak_pairs() -> Any:
    spec = importlib.util.spec_from_file_location("soak_pairs", ROOT / "benchmarks/soak_pairs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("soak_pairs", module)  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def test_the_soak_figures_subtract_the_direct_p99_of_the_same_pairs() -> None:
    soak = _soak_pairs()
    # 101 pairs: the inclusive p99 is the 100th of the sorted values (0-based index 99)
    gateway = [float(i) for i in range(101)]  # p99: 99
    direct = [0.5 * i for i in reversed(range(101))]  # p99: 49.5
    out = soak.figures(soak.Pairs(gateway=gateway, direct=direct, gateway_failed=2))
    assert out["pairs"] == 101 and out["gateway_failed"] == 2
    assert out["gateway_p99_ms"] == 99.0 and out["direct_p99_ms"] == 49.5
    assert out["gateway_added_p99_ms"] == 49.5
    # each pair's own difference: i - 0.5 * (100 - i) = 1.5 i - 50, p99 at i = 99
    assert out["paired_added_p99_ms"] == 98.5


def test_the_tracing_benchmark_runs_both_gateways_and_the_traced_one_exports() -> None:
    qwen2_dir = build_all(["qwen2"])["qwen2"]
    result = _last_json_line(
        "tracing_overhead.py", ["--quick", "--model-dir", str(qwen2_dir)], timeout_s=300
    )
    assert result["streams"] == 64 and result["requests_per_mode"] == 512
    for mode in ("off", "on", "on_sdk"):
        assert result[f"{mode}_req_per_s"] > 0 and result[f"{mode}_cpu_ms_per_request"] > 0
    # the traced gateways' exports held every span: 6 a request, the warm-up's too
    assert result["spans_sent"] == 6 * (512 + 128)
    assert result["sink_spans"] == result["sink_sdk_spans"] == result["spans_sent"]
    assert result["sink_posts"] > 0 and result["sink_sdk_posts"] > 0
    assert {"tracing_cpu_us_per_request", "tracing_cpu_us_sdk_per_request"} <= result.keys()
    assert result["on_other_threads_cpu_us"] > 0 and result["off_loop_thread_cpu_us"] > 0
    assert set(result["stages_us"]["ours"]) == {"finish", "write", "total"}
    assert result["off_path_ns_no_trace_headers"] > 0
