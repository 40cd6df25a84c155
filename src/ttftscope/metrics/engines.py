"""Engine-specific metric names (vLLM V1, vLLM V0, SGLang) mapped onto one neutral breakdown.

Each quantity has a list of candidate names, newest first; the first one the server exposes is
used. Series for the same quantity are summed across label sets (engines, ranks) unless a model
is given, which filters on ``model_name``. Whatever is missing becomes ``None`` plus a note that
says what it means, never an exception.

>>> from ttftscope.metrics.prom import parse, delta
>>> text = '# TYPE vllm:num_requests_running gauge\\nvllm:num_requests_running{engine="0"} 2\\n'
>>> b = breakdown(delta(parse(text, taken_ns=0), parse(text, taken_ns=1)))
>>> (b.engine, b.running, b.ttft_s is None)
('vllm-v1', 2.0, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ttftscope.metrics.prom import MetricsDelta, MetricsSnapshot, SampleView

Engine = Literal["vllm-v1", "vllm-v0", "sglang", "unknown"]
Quantity = Literal["ttft", "queue", "prefill", "decode", "e2e", "inference"]

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


@dataclass
class ServerBreakdown:
    """What the server says one request window cost; ``None`` = the server did not say.

    >>> ServerBreakdown(engine="unknown").ttft_s is None
    True
    """

    engine: str
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    e2e_s: float | None = None
    ttft_count: float | None = None
    queue_count: float | None = None
    prefill_count: float | None = None
    e2e_count: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    prefix_hit_rate: float | None = None
    cached_tokens: float | None = None
    computed_tokens: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    finished_requests: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    models: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()  # engine replica label values seen (vLLM "engine")
    notes: list[str] = field(default_factory=list)

    @property
    def frontend_s(self) -> float | None:
        """Server TTFT − queue − prefill: rendering, tokenization and IPC in the API server."""
        if self.ttft_s is None or self.queue_s is None or self.prefill_s is None:
            return None
        return self.ttft_s - self.queue_s - self.prefill_s

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready), including ``frontend_s``."""
        return {**asdict(self), "frontend_s": self.frontend_s}


def _family(engine: str) -> str:
    return "sglang" if engine == "sglang" else "vllm" if engine.startswith("vllm") else ""


def detect_engine(view: SampleView) -> Engine:
    """Which server produced these metrics: ``vllm-v1``, ``vllm-v0``, ``sglang`` or ``unknown``.

    >>> from ttftscope.metrics.prom import parse
    >>> detect_engine(parse('# TYPE sglang:num_queue_reqs gauge\\nsglang:num_queue_reqs 0\\n'))
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


class _Reader:
    """Looks quantities up by their candidate names, filtered by label ``match``."""

    def __init__(self, view: SampleView, engine: str, match: Mapping[str, str]) -> None:
        self.view, self.kind, self.match = view, _family(engine), dict(match)

    def _first(self, names: Iterable[str], suffix: str) -> str | None:
        return next((n for n in names if self.view.series(n + suffix)), None)

    def hist(self, qty: Quantity) -> tuple[float | None, float | None, str | None]:
        name = self._first(HISTOGRAMS.get(self.kind, {}).get(qty, ()), "_count")
        if name is None:
            return None, None, None
        return (
            self.view.value(name + "_sum", self.match),
            self.view.value(name + "_count", self.match),
            name,
        )

    def counter(self, key: str, match: Mapping[str, str] | None = None) -> float | None:
        name = self._first(COUNTERS.get(self.kind, {}).get(key, ()), "_total")
        return (
            None
            if name is None
            else self.view.value(name + "_total", {**self.match, **(match or {})})
        )

    def gauge(self, key: str) -> float | None:
        name = self._first(GAUGES.get(self.kind, {}).get(key, ()), "")
        if name is None:
            return None
        found = self.view.series(name, self.match)
        if not found:
            return None
        total = math.fsum(found.values())
        return total / len(found) if key in _MEAN_GAUGES else total


_WHAT = {
    "ttft": "server TTFT",
    "queue": "queue time",
    "prefill": "prefill time",
    "decode": "decode time",
    "e2e": "end-to-end latency",
}


def breakdown(
    delta: MetricsDelta, *, model: str | None = None, match: Mapping[str, str] | None = None
) -> ServerBreakdown:
    """Neutral per-window breakdown from a scrape delta; missing metrics become notes.

    ``model`` filters on the ``model_name`` label; ``match`` adds any other label filter
    (e.g. ``{"engine": "0"}`` for one vLLM data-parallel engine).

    >>> from ttftscope.metrics.prom import parse, delta as d
    >>> breakdown(d(parse("", taken_ns=0), parse("", taken_ns=0))).engine
    'unknown'
    """
    engine = detect_engine(delta)
    out = ServerBreakdown(engine=engine)
    out.notes.extend(delta.notes)
    if engine == "unknown":
        out.notes.append(
            "no vLLM or SGLang metrics found: the server is another kind or "
            "api.metrics_url points elsewhere; server-side breakdown unavailable"
        )
        return out
    prefix = "sglang" if engine == "sglang" else "vllm:"
    out.models = tuple(delta.label_values("model_name", prefix))
    lab = ENGINE_LABEL[_family(engine)]
    out.engines = tuple(delta.label_values(lab, prefix))
    model, ok = _resolve_model(out.models, model, out.notes)
    if not ok:
        return out
    filt = {**({"model_name": model} if model else {}), **(match or {})}
    rd = _Reader(delta, engine, filt)
    _fill_latencies(out, rd)
    _fill_tokens(out, rd)
    out.running, out.waiting = rd.gauge("running"), rd.gauge("waiting")
    out.kv_cache_usage = rd.gauge("kv_cache_usage")
    if model is None and len(out.models) > 1:
        out.notes.append(
            f"metrics cover several models ({', '.join(out.models)}) and were "
            "summed; pass the model name to look at one"
        )
    return out


def _resolve_model(
    models: tuple[str, ...], model: str | None, notes: list[str]
) -> tuple[str | None, bool]:
    """The model label to filter on, and whether any series can match it."""
    if model is None or not models or model in models:
        return model, True
    if len(models) == 1:
        # Served under an alias: vLLM labels everything with its first served model name.
        notes.append(
            f"the metrics name model {models[0]!r}, not {model!r}; using {models[0]!r} "
            "(the server's only model)"
        )
        return models[0], True
    notes.append(
        f"the metrics have no series for model {model!r} (they name: "
        f"{', '.join(models)}); pass the served model name, or none to sum all"
    )
    return model, False


def _fill_latencies(out: ServerBreakdown, rd: _Reader) -> None:
    qtys: tuple[Quantity, ...] = ("ttft", "queue", "prefill", "decode", "e2e")
    for qty in qtys:
        total, count, name = rd.hist(qty)
        setattr(out, f"{qty}_s", total)
        if qty != "decode":
            setattr(out, f"{qty}_count", count)
        if name is None:
            out.notes.append(_missing_note(qty, out.engine))
        elif qty == "ttft" and not count:
            out.notes.append(
                "no request finished its first token between the scrapes: scrape "
                "again after the stream ends (vLLM publishes metrics ~0.1-1 s "
                "late), or the traffic went to another server/model"
            )
        elif qty == "ttft" and count and count > 1:
            out.notes.append(
                f"{count:g} requests reached their first token in the window: "
                "other traffic ran, so the *_s values are totals over them, "
                "not one request's"
            )


def _missing_note(qty: str, engine: str) -> str:
    what = _WHAT[qty]
    if qty == "prefill" and engine == "sglang":
        return (
            "SGLang exposes no per-request prefill-time histogram: prefill and front-end "
            "time cannot be separated from server TTFT"
        )
    if qty in ("queue", "prefill"):
        return (
            f"the server exposes no {what} histogram (older vLLM?): the front-end share "
            "of server TTFT (template, tokenization) cannot be isolated"
        )
    return f"the server exposes no {what} histogram; {what} unknown"


def _fill_tokens(out: ServerBreakdown, rd: _Reader) -> None:
    out.prompt_tokens = rd.counter("prompt_tokens")
    out.generation_tokens = rd.counter("generation_tokens")
    out.preemptions = rd.counter("preemptions")
    out.finished_requests = rd.counter("finished")
    out.cached_tokens = rd.counter("cached_tokens")
    if out.engine == "sglang":
        _fill_sglang_prefix(out, rd)
    else:
        _fill_vllm_prefix(out, rd)
    if out.computed_tokens is None and None not in (out.prompt_tokens, out.cached_tokens):
        out.computed_tokens = (out.prompt_tokens or 0.0) - (out.cached_tokens or 0.0)


def _fill_vllm_prefix(out: ServerBreakdown, rd: _Reader) -> None:
    out.prefix_queries, out.prefix_hits = rd.counter("prefix_queries"), rd.counter("prefix_hits")
    if out.cached_tokens is None:
        out.cached_tokens = rd.view.value(
            "vllm:prompt_tokens_by_source_total", {**rd.match, "source": "local_cache_hit"}
        )
    kv = rd.view.histogram("vllm:request_prefill_kv_computed_tokens", rd.match)
    out.computed_tokens = kv.sum if kv is not None else None
    if out.prefix_queries is not None and out.prefix_hits is not None:
        if out.prefix_queries > 0:
            out.prefix_hit_rate = out.prefix_hits / out.prefix_queries
        else:
            out.notes.append(
                "no prefix-cache lookups in the window: no prompt was scheduled "
                "between the scrapes, or prefix caching is off"
            )
        return
    rate = rd.gauge("hit_rate")
    if rate is not None:
        out.prefix_hit_rate = rate
        out.notes.append(
            "prefix hit rate comes from vllm:gpu_prefix_cache_hit_rate (old V0 "
            "gauge): a block hit rate since server start, not this request's"
        )
    else:
        out.notes.append(
            "the server exposes no prefix-cache counters: prefix hits unknown "
            "(start vLLM with --enable-prefix-caching, or upgrade)"
        )


def _fill_sglang_prefix(out: ServerBreakdown, rd: _Reader) -> None:
    if out.cached_tokens is not None and out.prompt_tokens is not None:
        out.prefix_queries, out.prefix_hits = out.prompt_tokens, out.cached_tokens
        if out.prompt_tokens > 0:
            out.prefix_hit_rate = out.cached_tokens / out.prompt_tokens
            return
    rate = rd.gauge("hit_rate")
    out.prefix_hit_rate = rate
    if rate is not None:
        out.notes.append(
            "prefix hit rate comes from sglang:cache_hit_rate: a recent-window "
            "gauge of the scheduler, not this request's exact hit rate"
        )
    else:
        out.notes.append(
            "SGLang exposed neither cached_tokens_total nor cache_hit_rate: "
            "prefix hits unknown (start it with --enable-metrics)"
        )


def breakdown_per_engine(
    delta: MetricsDelta, *, model: str | None = None
) -> dict[str, ServerBreakdown]:
    """One breakdown per engine replica (vLLM ``engine`` label, SGLang ``dp_rank``).

    Servers without such a label give one entry under ``"*"``.
    """
    whole = breakdown(delta, model=model)
    fam = _family(whole.engine)
    if not whole.engines or not fam:
        return {"*": whole}
    return {e: breakdown(delta, model=model, match={ENGINE_LABEL[fam]: e}) for e in whole.engines}


def queue_depth(
    snapshot: MetricsSnapshot, *, model: str | None = None
) -> tuple[float | None, float | None]:
    """``(running, waiting)`` requests right now, summed over engines; None if not exposed.

    >>> from ttftscope.metrics.prom import parse
    >>> queue_depth(parse('# TYPE vllm:num_requests_waiting gauge\\n'
    ...                   'vllm:num_requests_waiting{model_name="m"} 3\\n'))
    (None, 3.0)
    """
    engine = detect_engine(snapshot)
    prefix = "sglang" if engine == "sglang" else "vllm:"
    model, _ = _resolve_model(tuple(snapshot.label_values("model_name", prefix)), model, [])
    rd = _Reader(snapshot, engine, {"model_name": model} if model else {})
    return rd.gauge("running"), rd.gauge("waiting")


def latency_quantiles(
    view: SampleView, qty: Quantity, qs: Iterable[float], *, model: str | None = None
) -> dict[float, float | None]:
    """Quantiles of one latency (``"ttft"``, ``"queue"``, ...) over a window, any engine.

    >>> from ttftscope.metrics.prom import parse
    >>> latency_quantiles(parse(""), "ttft", [0.5])
    {0.5: None}
    """
    qs = list(qs)
    rd = _Reader(view, detect_engine(view), {"model_name": model} if model else {})
    name = rd._first(HISTOGRAMS.get(rd.kind, {}).get(qty, ()), "_count")
    hist = view.histogram(name, rd.match) if name else None
    return {q: (hist.quantile(q) if hist else None) for q in qs}
