"""The servers' side of a run: per-part aggregates from histogram deltas, and the queue.

Between the full snapshot before the first measured request and the one after the last
had settled, a vLLM server's histograms counted every request it served in the run:
``_sum / _count`` deltas are exact means of server TTFT, queue and prefill (the front end
is the remainder, as in the probe), and bucket deltas give quantile estimates. Under
concurrency these are the only per-part figures that exist: one scrape cannot be pinned to
one request. If anything else used the server meanwhile, it is in the figures too (the
request counts tell).

The queue comes from the samples: peak and mean of ``num_requests_waiting``, and the share
of queue-time observations above the histogram's smallest bucket (vLLM: 0.3 s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ttftscope.bench.observe.sampler import MetricsSource, window
from ttftscope.metrics.engines import latency_quantiles, server_breakdown
from ttftscope.metrics.names import Reader
from ttftscope.metrics.prom import MetricsDelta

Flat = dict[str, float | None]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def pword(q: float) -> str:
    """A percentile as ``vllm bench serve`` spells it in keys.

    >>> pword(99.0), pword(99.9)
    ('99', '99.9')
    """
    return str(int(q)) if int(q) == q else str(q)


@dataclass(frozen=True)
class Sums:
    """Histogram ``_sum`` (seconds) and ``_count`` deltas of one server, or of several.

    >>> m = Sums(2, 1.0, 0.2, 2, 0.4, 2).means()
    >>> m["server_mean_ttft_ms"], round(m["server_mean_frontend_ms"], 3)
    (500.0, 200.0)
    """

    requests: float | None = None  # TTFT observations
    ttft_s: float | None = None
    queue_s: float | None = None
    queue_count: float | None = None
    prefill_s: float | None = None
    prefill_count: float | None = None
    prefix_hits: float | None = None
    prefix_queries: float | None = None
    queued_over_bucket: float | None = None  # queue observations above the smallest bucket

    def __add__(self, other: Sums) -> Sums:
        names = Sums.__dataclass_fields__
        return Sums(*(_total([getattr(self, n), getattr(other, n)]) for n in names))

    def means(self) -> Flat:
        """Mean server TTFT, queue, prefill and their remainder, the front end (ms)."""
        ttft, queue = _div(self.ttft_s, self.requests), _div(self.queue_s, self.queue_count)
        prefill = _div(self.prefill_s, self.prefill_count)
        front = None
        if ttft is not None and queue is not None and prefill is not None:
            front = ttft - queue - prefill
        return {
            "server_requests": self.requests,
            "server_mean_ttft_ms": _ms(ttft),
            "server_mean_queue_ms": _ms(queue),
            "server_mean_prefill_ms": _ms(prefill),
            "server_mean_frontend_ms": _ms(front),
            "prefix_hit_rate": _div(self.prefix_hits, self.prefix_queries),
            "server_waited_share": _div(self.queued_over_bucket, self.queue_count),
        }


@dataclass
class ServerParts:
    """One metrics source over the run: histogram sums and counts, queue and gateway."""

    source: str
    targets: list[str]
    engine: str
    sums: Sums = Sums()
    quantiles: Flat = field(default_factory=dict)
    queue_bucket_s: float | None = None  # smallest queue-time bucket bound
    gauges: Flat = field(default_factory=dict)
    gateway: Flat = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def is_engine(self) -> bool:
        """Whether this source is an inference server (vLLM, SGLang), not e.g. a gateway."""
        return self.engine != "unknown"


def _queue_bucket(delta: MetricsDelta) -> tuple[float | None, float | None]:
    """The smallest queue-time bucket bound and how many observations lay above it."""
    hist = delta.histogram("vllm:request_queue_time_seconds")
    if hist is None or not hist.count or not hist.buckets:
        return None, None
    bound, below = hist.buckets[0]
    return bound, hist.count - below


def _gateway(delta: MetricsDelta) -> Flat:
    out: Flat = {}
    for name in sorted(delta.sample_family):
        if name.startswith("ttftscope_gateway_") and not name.endswith(("_bucket", "_created")):
            out[name] = delta.value(name)
    return out


def server_parts(
    src: MetricsSource, *, model: str | None, percentiles: Sequence[float]
) -> ServerParts:
    """What ``src``'s snapshots and samples say about the run.

    >>> from ttftscope.bench.observe.sampler import MetricsSource
    >>> src = MetricsSource("http://h/metrics", ["gw"], {})
    >>> server_parts(src, model=None, percentiles=[50]).notes
    ['no full snapshot before and after the run: no server aggregates']
    """
    delta = window(src)
    parts = ServerParts(src.shown, list(src.targets), "unknown", notes=list(src.notes))
    parts.gauges = {
        "peak_waiting": src.waiting.peak,
        "mean_waiting": src.waiting.mean,
        "peak_running": src.running.peak,
        "mean_running": src.running.mean,
        "peak_kv_cache_usage": src.kv_cache_usage.peak,
        "mean_kv_cache_usage": src.kv_cache_usage.mean,
    }
    if delta is None:
        parts.notes.append("no full snapshot before and after the run: no server aggregates")
        return parts
    bd = server_breakdown(delta, model=model)
    parts.engine = bd.engine
    parts.gateway = _gateway(delta)
    if not parts.is_engine:
        return parts
    rd = Reader(delta, bd.engine, {})
    parts.queue_bucket_s, over = _queue_bucket(delta)
    parts.sums = Sums(
        requests=bd.ttft_count,
        ttft_s=bd.ttft_s,
        queue_s=bd.queue_s,
        queue_count=rd.hist("queue")[1],
        prefill_s=bd.prefill_s,
        prefill_count=rd.hist("prefill")[1],
        prefix_hits=bd.prefix_hits,
        prefix_queries=bd.prefix_queries,
        queued_over_bucket=over,
    )
    qs = [q / 100 for q in percentiles]
    for qty in ("ttft", "queue"):
        est = latency_quantiles(delta, qty, qs, model=model)
        for q in percentiles:
            parts.quantiles[f"server_p{pword(q)}_{qty}_ms"] = _ms(est[q / 100])
    return parts


def server_keys(parts: ServerParts) -> Flat:
    """Flat keys of one source: means, quantile estimates, hit rate, queue, waited share.

    >>> parts = ServerParts("http://h/metrics", ["direct"], "vllm-v1", Sums(1, 0.2))
    >>> server_keys(parts)["server_mean_ttft_ms"]
    200.0
    """
    out = parts.sums.means()
    out.update(parts.quantiles)
    out["server_waited_threshold_ms"] = _ms(parts.queue_bucket_s)
    out.update(parts.gauges)
    return out


def _total(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _peak(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def combined_keys(all_parts: Sequence[ServerParts], percentiles: Sequence[float]) -> Flat:
    """The run's server keys over every inference server among the targets.

    Sums and counts add up across servers; quantile estimates exist for one server only.

    >>> combined_keys([], [50])["server_requests"] is None
    True
    """
    engines = [p for p in all_parts if p.is_engine]
    if len(engines) == 1:
        return server_keys(engines[0])

    out = sum((p.sums for p in engines), Sums()).means()
    for q in percentiles:
        out[f"server_p{pword(q)}_ttft_ms"] = out[f"server_p{pword(q)}_queue_ms"] = None
    out["server_waited_threshold_ms"] = _ms(engines[0].queue_bucket_s) if engines else None
    for key in ("peak_waiting", "peak_running", "peak_kv_cache_usage", "mean_kv_cache_usage"):
        out[key] = _peak([p.gauges.get(key) for p in engines])
    for key in ("mean_waiting", "mean_running"):  # queues of several servers add up
        out[key] = _total([p.gauges.get(key) for p in engines])
    return out


def parts_by_source(parts: Sequence[ServerParts]) -> dict[str, Mapping[str, object]]:
    """The ``servers`` section of the summary: each source's keys, targets and notes.

    >>> list(parts_by_source([ServerParts("http://h/metrics", ["direct"], "unknown")]))
    ['http://h/metrics']
    """
    return {
        p.source: {
            "targets": p.targets,
            "engine": p.engine,
            **server_keys(p),
            "gateway": p.gateway,
            "notes": p.notes,
        }
        for p in parts
    }
