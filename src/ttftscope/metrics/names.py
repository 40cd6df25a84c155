"""Engine metric names (vLLM V1, vLLM V0, SGLang) and looking them up in a snapshot or delta.

Each quantity has a list of candidate names, newest first; the first one the server exposes is
used. :mod:`.engines` turns what :class:`Reader` finds into a breakdown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Literal

from ttftscope.metrics.histogram import sum_values
from ttftscope.metrics.prom import SampleView

Engine = Literal["vllm-v1", "vllm-v0", "sglang", "unknown"]
Quantity = Literal["ttft", "queue", "prefill", "decode", "e2e", "inference", "render"]

_V0_MARKERS = (
    "vllm:gpu_prefix_cache_hit_rate",
    "vllm:cpu_prefix_cache_hit_rate",
    "vllm:num_requests_swapped",
    "vllm:cpu_cache_usage_perc",
)
# SGLang >= 0.5.4 may write "sglang_" instead of "sglang:"; both spellings are tried.
_SG = ("sglang:", "sglang_")

HISTOGRAMS: dict[str, dict[Quantity, tuple[str, ...]]] = {
    "vllm": {
        "ttft": ("vllm:time_to_first_token_seconds",),
        "queue": ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests"),
        "prefill": ("vllm:request_prefill_time_seconds",),
        "decode": ("vllm:request_decode_time_seconds",),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "inference": ("vllm:request_inference_time_seconds",),
        # 0.34+: the front end's own templating + tokenization (chat, messages, completions)
        "render": ("vllm:request_render_duration_seconds",),
    },
    "sglang": {
        "ttft": tuple(p + "time_to_first_token_seconds" for p in _SG),
        "queue": tuple(p + "queue_time_seconds" for p in _SG),
        "e2e": tuple(p + "e2e_request_latency_seconds" for p in _SG),
    },
}
# Counter family names (the exposition adds "_total").
COUNTERS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "prefix_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
        "prefix_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
        "cached_tokens": ("vllm:prompt_tokens_cached",),
        "prompt_tokens": ("vllm:prompt_tokens",),
        "generation_tokens": ("vllm:generation_tokens",),
        "preemptions": ("vllm:num_preemptions",),
        "finished": ("vllm:request_success",),
    },
    "sglang": {
        "prompt_tokens": tuple(p + "prompt_tokens" for p in _SG),
        "cached_tokens": tuple(p + "cached_tokens" for p in _SG),
        "generation_tokens": tuple(p + "generation_tokens" for p in _SG),
        "finished": tuple(p + "num_requests" for p in _SG),
    },
}
GAUGES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
    },
    "sglang": {
        "running": tuple(p + "num_running_reqs" for p in _SG),
        "waiting": tuple(p + "num_queue_reqs" for p in _SG),
        "kv_cache_usage": tuple(p + "token_usage" for p in _SG),
        "hit_rate": tuple(p + "cache_hit_rate" for p in _SG),
    },
}
# Fractions are averaged over label sets; counts of requests add up.
_MEAN_GAUGES = {"kv_cache_usage", "hit_rate"}
# The label that tells engine replicas apart (vLLM data parallel, SGLang DP attention).
ENGINE_LABEL = {"vllm": "engine", "sglang": "dp_rank"}


def family_of(engine: str) -> str:
    return "sglang" if engine == "sglang" else "vllm" if engine.startswith("vllm") else ""


def detect_engine(view: SampleView) -> Engine:
    """Which server produced these metrics: ``vllm-v1``, ``vllm-v0``, ``sglang`` or ``unknown``.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> detect_engine(parse_metrics('# TYPE sglang:num_queue_reqs gauge\\n'
    ...                             'sglang:num_queue_reqs 0\\n'))
    'sglang'
    """
    names = set(view.families) | set(view.sample_family)
    if any(n.startswith(_SG) for n in names):
        return "sglang"
    if any(m in names for m in _V0_MARKERS):
        return "vllm-v0"
    if any(n.startswith("vllm:") for n in names):
        return "vllm-v1"
    return "unknown"


class Reader:
    """Looks quantities up by their candidate names, filtered by label ``match``.

    Values that are not finite come back as None, with a note in ``notes`` naming them.
    """

    def __init__(self, view: SampleView, engine: str, match: Mapping[str, str]) -> None:
        self.view, self.kind, self.match = view, family_of(engine), dict(match)
        self.notes: list[str] = []
        self.non_finite: set[str] = set()

    def first(self, names: Iterable[str], suffix: str) -> str | None:
        return next((n for n in names if self.view.series(n + suffix)), None)

    def _finite(self, name: str, value: float | None) -> float | None:
        if value is None or math.isfinite(value):
            return value
        if name not in self.non_finite:
            self.non_finite.add(name)
            self.notes.append(
                f"{name} is {value} in this window, not a number: left unknown (the "
                "server's exporter is broken, or a counter overflowed)"
            )
        return None

    def hist(self, qty: Quantity) -> tuple[float | None, float | None, str | None]:
        name = self.first(HISTOGRAMS.get(self.kind, {}).get(qty, ()), "_count")
        if name is None:
            return None, None, None
        total = self.view.value(name + "_sum", self.match)
        count = self.view.value(name + "_count", self.match)
        return self._finite(name + "_sum", total), self._finite(name + "_count", count), name

    def counter(self, key: str, match: Mapping[str, str] | None = None) -> float | None:
        name = self.first(COUNTERS.get(self.kind, {}).get(key, ()), "_total")
        if name is None:
            return None
        value = self.view.value(name + "_total", {**self.match, **(match or {})})
        return self._finite(name + "_total", value)

    def gauge(self, key: str) -> float | None:
        name = self.first(GAUGES.get(self.kind, {}).get(key, ()), "")
        if name is None:
            return None
        found = self.view.series(name, self.match)
        if not found:
            return None
        total = sum_values(found.values())
        return self._finite(name, total / len(found) if key in _MEAN_GAUGES else total)
