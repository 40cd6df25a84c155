"""Server metrics: scrape Prometheus ``/metrics``, diff two scrapes, map engine names.

>>> from ttftscope.metrics import parse, delta, breakdown
>>> breakdown(delta(parse("", taken_ns=0), parse("", taken_ns=0))).engine
'unknown'
"""

from ttftscope.metrics.engines import (
    ServerBreakdown,
    breakdown,
    breakdown_per_engine,
    detect_engine,
    latency_quantiles,
    queue_depth,
)
from ttftscope.metrics.prom import (
    HistogramDelta,
    Labels,
    MetricsDelta,
    MetricsSnapshot,
    SampleKey,
    SampleView,
    ascrape,
    delta,
    histogram_quantile,
    histogram_quantiles,
    labels_of,
    parse,
    safe_url,
    scrape,
)

__all__ = [
    "HistogramDelta",
    "Labels",
    "MetricsDelta",
    "MetricsSnapshot",
    "SampleKey",
    "SampleView",
    "ServerBreakdown",
    "ascrape",
    "breakdown",
    "breakdown_per_engine",
    "delta",
    "detect_engine",
    "histogram_quantile",
    "histogram_quantiles",
    "labels_of",
    "latency_quantiles",
    "parse",
    "queue_depth",
    "safe_url",
    "scrape",
]
