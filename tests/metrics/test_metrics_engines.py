"""Engine names → neutral breakdown: vLLM V1 (real exposition), V0 and SGLang fixtures."""

from __future__ import annotations

import pytest

from tests.metrics.metrics_expo import Expo
from ttftscope.metrics.engines import (
    breakdown_per_engine,
    latency_quantiles,
    queue_depth,
    server_breakdown,
)
from ttftscope.metrics.names import detect_engine
from ttftscope.metrics.prom import MetricsDelta, metrics_delta, parse_metrics

V = "vllm:"


def _probe_window(text: str, expo: Expo, *, engine: str = "") -> str:
    """What one 31K-token warm request does to vLLM V1 metrics (numbers from the notes)."""
    sel = f'engine="{engine}"' if engine else ""
    observed = {
        "time_to_first_token_seconds": 0.333,
        "request_queue_time_seconds": 0.002,
        "request_prefill_time_seconds": 0.161,
        "request_decode_time_seconds": 0.05,
        "e2e_request_latency_seconds": 0.4,
        "request_prefill_kv_computed_tokens": 367.0,
    }
    for name, value in observed.items():
        text = expo.observe(text, V + name, value, sel)
    counted = {
        "prefix_cache_queries_total": 31599,
        "prefix_cache_hits_total": 31232,
        "prompt_tokens_total": 31599,
        "prompt_tokens_cached_total": 31232,
        "generation_tokens_total": 4,
    }
    for name, count in counted.items():
        text = expo.add(text, V + name, count, sel)
    return expo.add(text, V + "request_success_total", 1, 'finished_reason="length"')


def _window(before: str, after: str) -> MetricsDelta:
    return metrics_delta(parse_metrics(before, taken_ns=0), parse_metrics(after, taken_ns=1))


def test_vllm_v1_breakdown_of_one_request(vllm_text: str, expo: Expo) -> None:
    after = expo.set(_probe_window(vllm_text, expo), V + "num_requests_waiting", 2)
    b = server_breakdown(_window(vllm_text, after))
    assert b.engine == "vllm-v1" and b.models == ("tiny",) and b.engines == ("0",)
    assert (b.ttft_s, b.queue_s, b.prefill_s) == pytest.approx((0.333, 0.002, 0.161))
    assert (b.decode_s, b.e2e_s) == pytest.approx((0.05, 0.4))
    assert (b.ttft_count, b.queue_count, b.prefill_count, b.e2e_count) == (1, 1, 1, 1)
    assert b.frontend_s == pytest.approx(0.333 - 0.002 - 0.161)
    assert (b.prefix_queries, b.prefix_hits) == (31599, 31232)
    assert b.prefix_hit_rate == pytest.approx(31232 / 31599)
    assert (b.cached_tokens, b.computed_tokens, b.prompt_tokens) == (31232, 367, 31599)
    assert (b.generation_tokens, b.finished_requests, b.preemptions) == (4, 1, 0)
    assert (b.running, b.waiting, b.kv_cache_usage) == (0, 2, 0)
    assert b.notes == []
    assert b.to_dict()["frontend_s"] == pytest.approx(b.frontend_s)


def test_model_filter_and_alias(vllm_text: str, expo: Expo) -> None:
    d = _window(vllm_text, _probe_window(vllm_text, expo))
    assert server_breakdown(d, model="tiny").ttft_s == pytest.approx(0.333)
    alias = server_breakdown(d, model="my-alias")  # one model on the server: use it, say so
    assert alias.ttft_s == pytest.approx(0.333)
    assert any("'my-alias'" in n and "'tiny'" in n for n in alias.notes)


def test_two_engines_are_summed_and_kept_apart(vllm_text: str, expo: Expo) -> None:
    # Engine 1's samples go right after engine 0's: the parser groups by the TYPE line above.
    lines: list[str] = []
    for ln in vllm_text.splitlines():
        lines.append(ln)
        if 'engine="0"' in ln:
            lines.append(ln.replace('engine="0"', 'engine="1"'))
    before = "\n".join(lines) + "\n"
    before = expo.set(before, V + "kv_cache_usage_perc", 0.5, 'engine="1"')
    after = _probe_window(before, expo, engine="0")
    after = _probe_window(after, expo, engine="1")
    d = _window(before, after)
    both = server_breakdown(d)
    assert both.engines == ("0", "1")
    assert both.ttft_s == pytest.approx(0.666) and both.ttft_count == 2
    assert both.prefix_hits == 2 * 31232
    assert both.kv_cache_usage == pytest.approx(0.25)  # a fraction: averaged, not summed
    assert any("2 requests" in n for n in both.notes)  # other traffic warning
    per = breakdown_per_engine(d)
    assert set(per) == {"0", "1"}
    assert per["1"].ttft_s == pytest.approx(0.333) and per["1"].ttft_count == 1
    assert per["1"].kv_cache_usage == 0.5


def test_two_models_summed_with_note(vllm_text: str, expo: Expo) -> None:
    lines: list[str] = []
    for ln in vllm_text.splitlines():
        lines.append(ln)
        if 'model_name="tiny"' in ln and ln.startswith(V):
            lines.append(ln.replace('model_name="tiny"', 'model_name="big"'))
    before = "\n".join(lines) + "\n"
    after = expo.observe(before, V + "time_to_first_token_seconds", 0.5, 'model_name="big"')
    d = _window(before, after)
    assert server_breakdown(d).models == ("big", "tiny")
    assert any("several models" in n for n in server_breakdown(d).notes)
    assert server_breakdown(d, model="tiny").ttft_count == 0
    assert server_breakdown(d, model="big").ttft_s == pytest.approx(0.5)
    other = server_breakdown(d, model="llama")
    assert other.ttft_s is None and other.prefix_hits is None and other.running is None
    assert any("'llama'" in n and "big, tiny" in n for n in other.notes)
    assert queue_depth(parse_metrics(after), model="llama") == (None, None)
    assert queue_depth(parse_metrics(after), model="big") == (0, 0)


def test_missing_metrics_become_notes(vllm_text: str, expo: Expo) -> None:
    old = expo.drop(
        vllm_text,
        V + "request_queue_time",
        V + "request_prefill_time",
        V + "prefix_cache",
        V + "prompt_tokens_cached",
        V + "kv_cache_usage",
    )
    after = expo.observe(old, V + "time_to_first_token_seconds", 0.1)
    b = server_breakdown(_window(old, after))
    assert b.engine == "vllm-v1" and b.ttft_s == pytest.approx(0.1)
    assert b.queue_s is None and b.prefill_s is None and b.frontend_s is None
    assert b.prefix_hits is None and b.prefix_hit_rate is None and b.kv_cache_usage is None
    assert b.cached_tokens == 0  # falls back to prompt_tokens_by_source{local_cache_hit}
    joined = " ".join(b.notes)
    assert "queue time" in joined and "prefill time" in joined and "prefix-cache" in joined


def test_idle_window_and_unknown_server(vllm_text: str) -> None:
    b = server_breakdown(_window(vllm_text, vllm_text))
    assert b.ttft_s == 0 and b.ttft_count == 0 and b.prefix_hit_rate is None
    assert any("no request finished" in n for n in b.notes)
    assert any("no prefix-cache lookups" in n for n in b.notes)
    other = server_breakdown(_window("# TYPE up gauge\nup 1\n", "# TYPE up gauge\nup 1\n"))
    assert other.engine == "unknown" and other.ttft_s is None and other.notes


def test_restart_notes_flow_into_breakdown(vllm_text: str, expo: Expo) -> None:
    after = expo.set(vllm_text, V + "prefix_cache_queries_total", 10)
    assert any("restarted" in n for n in server_breakdown(_window(vllm_text, after)).notes)


def test_queue_depth_and_detection(
    vllm_text: str, expo: Expo, v0_text: str, sglang_text: str
) -> None:
    busy = expo.set(
        expo.set(vllm_text, V + "num_requests_waiting", 7), V + "num_requests_running", 2
    )
    assert queue_depth(parse_metrics(busy)) == (2, 7)
    assert queue_depth(parse_metrics(busy), model="alias") == (2, 7)
    assert queue_depth(parse_metrics(v0_text)) == (2, 5)
    assert queue_depth(parse_metrics(sglang_text)) == (3, 1)
    assert queue_depth(parse_metrics("")) == (None, None)
    assert [detect_engine(parse_metrics(t)) for t in (vllm_text, v0_text, sglang_text, "")] == [
        "vllm-v1",
        "vllm-v0",
        "sglang",
        "unknown",
    ]


def test_vllm_v0(v0_text: str, expo: Expo) -> None:
    after = expo.observe(v0_text, V + "time_to_first_token_seconds", 0.07)
    after = expo.observe(after, V + "request_prefill_time_seconds", 0.05)
    after = expo.add(after, V + "prompt_tokens_total", 2048)
    b = server_breakdown(_window(v0_text, after))
    assert b.engine == "vllm-v0" and b.models == ("facebook/opt-125m",)
    assert b.ttft_s == pytest.approx(0.07) and b.prefill_s == pytest.approx(0.05)
    assert b.queue_s == 0 and b.queue_count == 0
    assert b.prefix_queries is None and b.prefix_hits is None
    assert b.prefix_hit_rate == 0.4375 and b.kv_cache_usage == 0.625
    assert b.prompt_tokens == 2048 and b.cached_tokens is None and b.computed_tokens is None
    assert any("gpu_prefix_cache_hit_rate" in n for n in b.notes)


@pytest.mark.parametrize("prefix", ["sglang:", "sglang_"])
def test_sglang(sglang_text: str, expo: Expo, prefix: str) -> None:
    text = sglang_text.replace("sglang:", prefix)
    after = expo.observe(text, prefix + "time_to_first_token_seconds", 0.8)
    after = expo.observe(after, prefix + "queue_time_seconds", 0.05)
    after = expo.add(after, prefix + "prompt_tokens_total", 4000)
    after = expo.add(after, prefix + "cached_tokens_total", 3072, 'cache_source="device"')
    b = server_breakdown(_window(text, after), model="meta-llama/Llama-3.1-8B-Instruct")
    assert b.engine == "sglang"
    assert (b.ttft_s, b.queue_s, b.ttft_count) == pytest.approx((0.8, 0.05, 1))
    assert b.prefill_s is None and any("prefill" in n for n in b.notes)
    assert (b.prompt_tokens, b.cached_tokens, b.computed_tokens) == (4000, 3072, 928)
    assert b.prefix_hit_rate == pytest.approx(3072 / 4000)
    assert (b.running, b.waiting, b.kv_cache_usage) == (3, 1, 0.28)


def test_sglang_without_token_counters_falls_back_to_gauge(sglang_text: str, expo: Expo) -> None:
    text = expo.drop(sglang_text, "sglang:cached_tokens")
    b = server_breakdown(_window(text, text))
    assert b.prefix_hit_rate == pytest.approx(0.007507552643049313)
    assert any("cache_hit_rate" in n for n in b.notes)


def test_latency_quantiles_any_engine(sglang_text: str, vllm_text: str, expo: Expo) -> None:
    after = sglang_text
    for v in (0.3, 0.3, 0.3):
        after = expo.observe(after, "sglang:time_to_first_token_seconds", v)
    q = latency_quantiles(_window(sglang_text, after), "ttft", [0.5])[0.5]
    assert q is not None and 0.25 <= q <= 0.5
    assert latency_quantiles(parse_metrics(vllm_text), "queue", [0.5, 0.9]) == pytest.approx(
        {0.5: 0.15, 0.9: 0.27}
    )  # 20 observations, all in the first (0..0.3 s) bucket
    assert latency_quantiles(parse_metrics(sglang_text), "prefill", [0.5]) == {0.5: None}
