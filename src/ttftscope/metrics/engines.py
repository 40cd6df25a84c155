"""Engine metrics (vLLM V1, vLLM V0, SGLang) mapped onto one neutral breakdown.

The candidate names of each quantity live in :mod:`.names`, newest first; the first one the
server exposes is used. Series for the same quantity are summed across label sets (engines,
ranks) unless a model is given, which filters on ``model_name``. Whatever is missing becomes
``None`` plus a note that says what it means, never an exception; so does any value that is
NaN or ±Inf (a broken exporter, or a counter that overflowed): every number in a breakdown is
finite or ``None``.

>>> from ttftscope.metrics.prom import parse_metrics, metrics_delta
>>> text = '# TYPE vllm:num_requests_running gauge\\nvllm:num_requests_running{engine="0"} 2\\n'
>>> window = metrics_delta(parse_metrics(text, taken_ns=0), parse_metrics(text, taken_ns=1))
>>> b = server_breakdown(window)
>>> (b.engine, b.running, b.ttft_s is None)
('vllm-v1', 2.0, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ttftscope.metrics.names import (
    ENGINE_LABEL,
    HISTOGRAMS,
    Quantity,
    Reader,
    detect_engine,
    family_of,
)
from ttftscope.metrics.prom import MetricsDelta, MetricsSnapshot, SampleView


@dataclass
class ServerBreakdown:
    """What the server says one request window cost; ``None`` = the server did not say.

    Every number is finite or ``None``. ``*_count`` (requests the histogram counted in the
    window) is ``None`` when the server exposes no such histogram *and* when its count came
    out NaN or ±Inf — not a count, so a caller waiting for a count to reach 1 should stop
    waiting on ``None``; a note then names the metric.

    >>> ServerBreakdown(engine="unknown").ttft_s is None
    True
    """

    engine: str
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    e2e_s: float | None = None
    render_s: float | None = None  # vLLM 0.34+: its own rendering and tokenization
    render_count: float | None = None
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
        front = self.ttft_s - self.queue_s - self.prefill_s
        return front if math.isfinite(front) else None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready), including ``frontend_s``."""
        return {**asdict(self), "frontend_s": self.frontend_s}


_WHAT = {
    "ttft": "server TTFT",
    "queue": "queue time",
    "prefill": "prefill time",
    "decode": "decode time",
    "e2e": "end-to-end latency",
}


def server_breakdown(
    delta: MetricsDelta, *, model: str | None = None, match: Mapping[str, str] | None = None
) -> ServerBreakdown:
    """Neutral per-window breakdown from a scrape delta; missing metrics become notes.

    ``model`` filters on the ``model_name`` label; ``match`` adds any other label filter
    (e.g. ``{"engine": "0"}`` for one vLLM data-parallel engine).

    >>> from ttftscope import metrics_delta, parse_metrics, server_breakdown
    >>> text = '# TYPE vllm:num_requests_waiting gauge\\nvllm:num_requests_waiting 3\\n'
    >>> before, after = parse_metrics(text, taken_ns=0), parse_metrics(text, taken_ns=10**9)
    >>> b = server_breakdown(metrics_delta(before, after)); b.engine, b.waiting
    ('vllm-v1', 3.0)
    >>> server_breakdown(metrics_delta(parse_metrics(""), parse_metrics(""))).engine
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
    lab = ENGINE_LABEL[family_of(engine)]
    out.engines = tuple(delta.label_values(lab, prefix))
    model, ok = _resolve_model(out.models, model, out.notes)
    if not ok:
        return out
    filt = {**({"model_name": model} if model else {}), **(match or {})}
    rd = Reader(delta, engine, filt)
    _fill_latencies(out, rd)
    _fill_tokens(out, rd)
    out.running, out.waiting = rd.gauge("running"), rd.gauge("waiting")
    out.kv_cache_usage = rd.gauge("kv_cache_usage")
    out.notes.extend(rd.notes)
    _drop_non_finite(out)
    if model is None and len(out.models) > 1:
        out.notes.append(
            f"metrics cover several models ({', '.join(out.models)}) and were "
            "summed; pass the model name to look at one"
        )
    return out


def _drop_non_finite(out: ServerBreakdown) -> None:
    """Derived values (hit rate, computed tokens) can overflow even from finite inputs."""
    for f in fields(out):
        value = getattr(out, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            setattr(out, f.name, None)
            out.notes.append(f"{f.name} came out as {value}, not a number: left unknown")


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


def _fill_latencies(out: ServerBreakdown, rd: Reader) -> None:
    qtys: tuple[Quantity, ...] = ("ttft", "queue", "prefill", "decode", "e2e")
    for qty in qtys:
        total, count, name = rd.hist(qty)
        setattr(out, f"{qty}_s", total)
        if qty != "decode":
            setattr(out, f"{qty}_count", count)
        if name is None:
            out.notes.append(_missing_note(qty, out.engine))
        elif qty == "ttft" and f"{name}_count" not in rd.non_finite:
            out.notes.extend(_ttft_count_notes(count))
    # measured by vLLM 0.34+ only: an older server's silence is no gap worth a note
    out.render_s, out.render_count, _ = rd.hist("render")


def _ttft_count_notes(count: float | None) -> list[str]:
    if not count:
        return [
            "no request finished its first token between the scrapes: scrape "
            "again after the stream ends (vLLM publishes metrics ~0.1-1 s "
            "late), or the traffic went to another server/model"
        ]
    if count > 1:
        return [
            f"{count:g} requests reached their first token in the window: "
            "other traffic ran, so the *_s values are totals over them, "
            "not one request's"
        ]
    return []


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


def _fill_tokens(out: ServerBreakdown, rd: Reader) -> None:
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


def _fill_vllm_prefix(out: ServerBreakdown, rd: Reader) -> None:
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


def _fill_sglang_prefix(out: ServerBreakdown, rd: Reader) -> None:
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
    whole = server_breakdown(delta, model=model)
    fam = family_of(whole.engine)
    if not whole.engines or not fam:
        return {"*": whole}
    return {
        e: server_breakdown(delta, model=model, match={ENGINE_LABEL[fam]: e}) for e in whole.engines
    }


def queue_depth(
    snapshot: MetricsSnapshot, *, model: str | None = None
) -> tuple[float | None, float | None]:
    """``(running, waiting)`` requests right now, summed over engines; None if not exposed.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> queue_depth(parse_metrics('# TYPE vllm:num_requests_waiting gauge\\n'
    ...                   'vllm:num_requests_waiting{model_name="m"} 3\\n'))
    (None, 3.0)
    """
    engine = detect_engine(snapshot)
    prefix = "sglang" if engine == "sglang" else "vllm:"
    model, _ = _resolve_model(tuple(snapshot.label_values("model_name", prefix)), model, [])
    rd = Reader(snapshot, engine, {"model_name": model} if model else {})
    return rd.gauge("running"), rd.gauge("waiting")


def latency_quantiles(
    view: SampleView, qty: Quantity, qs: Iterable[float], *, model: str | None = None
) -> dict[float, float | None]:
    """Quantiles of one latency (``"ttft"``, ``"queue"``, ...) over a window, any engine.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> latency_quantiles(parse_metrics(""), "ttft", [0.5])
    {0.5: None}
    """
    qs = list(qs)
    rd = Reader(view, detect_engine(view), {"model_name": model} if model else {})
    name = rd.first(HISTOGRAMS.get(rd.kind, {}).get(qty, ()), "_count")
    hist = view.histogram(name, rd.match) if name else None
    return {q: (hist.quantile(q) if hist else None) for q in qs}
