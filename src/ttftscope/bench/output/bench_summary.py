"""The bench summary: ``vllm bench serve``'s flat keys, per target too, plus the servers'.

Latency statistics come from measured, successful requests only: warmups and failures
(429 included) are counted, never averaged. Keys as ``vllm bench serve`` writes them
(``completed``, ``failed``, ``duration``, ``request_throughput``, ``mean_/median_/std_/pNN_``
of ``ttft``, ``tpot``, ``itl`` and ``e2el`` in ms), then ours: the servers' per-part means
from histogram deltas, prefix hit rate, queue peak and mean, the share of requests that
met a waiting queue, whether rate limiting contaminated the run, and (schema 2) the
per-request parts by context bucket and target (``parts_by_bucket``: median, p90, how many
requests had each part and from which source). Milliseconds are
rounded to 3 decimals, rates and shares to 4. The schema, which reports read too, is
:class:`~ttftscope.results.summaries.BenchSummary`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ttftscope.bench.observe.servers import ServerParts, combined_keys, parts_by_source, pword
from ttftscope.errors import FailureKind
from ttftscope.records import RequestRecord, failure_tally
from ttftscope.results.request_parts import parts_by_bucket
from ttftscope.results.summaries import BenchSummary
from ttftscope.stats import percentile

# 2: parts_by_bucket, the per-request parts by context bucket and target (1 had none)
SUMMARY_SCHEMA_VERSION = 2
CONTAMINATION_SHARE = 0.01  # more than 1% of requests rate limited: the run is not clean
METRICS = ("ttft", "tpot", "itl", "e2el")
CONTAMINATION_ADVICE = (
    "more than 1% of requests were rate limited (429): latency figures describe a throttled "
    "run. Use a separate API key for load tests and a lower --request-rate (or "
    "--max-concurrency)."
)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    if not values:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def metric_keys(name: str, values: Sequence[float], percentiles: Sequence[float]) -> dict[str, Any]:
    """``mean_/median_/std_/pNN_{name}_ms`` of ``values`` (None without values).

    >>> k = metric_keys("ttft", [1.0, 2.0, 3.0], [99])
    >>> k["mean_ttft_ms"], k["median_ttft_ms"], round(k["std_ttft_ms"], 3), k["p99_ttft_ms"]
    (2.0, 2.0, 0.816, 2.98)
    """
    out: dict[str, Any] = {
        f"mean_{name}_ms": _mean(values),
        f"median_{name}_ms": percentile(values, 50),
        f"std_{name}_ms": _std(values),
    }
    for q in percentiles:
        out[f"p{pword(q)}_{name}_ms"] = percentile(values, q)
    return out


def _values(records: Sequence[RequestRecord], attr: str) -> list[float]:
    return [v for r in records if (v := getattr(r, attr)) is not None and math.isfinite(v)]


def client_keys(
    records: Sequence[RequestRecord],
    itl_ms: Sequence[float],
    duration_s: float,
    percentiles: Sequence[float],
) -> dict[str, Any]:
    """The ``vllm bench serve`` keys of a set of measured requests (one target, or all).

    >>> k = client_keys([RequestRecord(run_id="r", index=0, variant="chat", phase="warm",
    ...                              ok=True, client_ttft_ms=20.0)], [5.0], 2.0, [99])
    >>> k["completed"], k["request_throughput"], k["p99_ttft_ms"], k["median_itl_ms"]
    (1, 0.5, 20.0, 5.0)
    """
    ok = [r for r in records if r.ok]
    rate_limited = sum(r.error_kind is FailureKind.RATE_LIMITED for r in records)
    tokens_in = sum(r.prompt_tokens or 0 for r in ok)
    tokens_out = sum(r.completion_tokens or 0 for r in ok)
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    waited = [r.waiting_before for r in ok if r.waiting_before is not None]
    out: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "rate_limited": rate_limited,
        "rate_limited_share": rate_limited / len(records) if records else 0.0,
        "total_input_tokens": tokens_in,
        "total_output_tokens": tokens_out,
        "request_throughput": len(ok) * per_s,
        "output_throughput": tokens_out * per_s,
        "total_token_throughput": (tokens_in + tokens_out) * per_s,
        "cold_requests": sum(r.phase == "cold" for r in ok),
        "waited_share": sum(w > 0 for w in waited) / len(waited) if waited else None,
    }
    out["contaminated"] = out["rate_limited_share"] > CONTAMINATION_SHARE
    for name, attr in (("ttft", "client_ttft_ms"), ("tpot", "tpot_ms"), ("e2el", "e2el_ms")):
        out.update(metric_keys(name, _values(ok, attr), percentiles))
    out.update(metric_keys("itl", list(itl_ms), percentiles))
    return out


@dataclass(frozen=True)
class RunFacts:
    """Everything a summary is made of (built by the runner at the end of a run)."""

    header: Mapping[str, Any]  # run id, label, seed, shard, model, options, paths
    records: Sequence[RequestRecord]
    itl_ms: Mapping[str, Sequence[float]]  # per target
    targets: Sequence[str]
    servers: Sequence[ServerParts]
    duration_s: float
    percentiles: Sequence[float]


def summarize_bench(facts: RunFacts) -> dict[str, Any]:
    """The summary: header, flat keys over all targets, then per target and per server.

    >>> head = {"kind": "bench", "run_id": "r", "seed": 0, "shard": "1/1", "model": "m"}
    >>> s = summarize_bench(RunFacts(head, [], {}, ["direct"], [], 1.0, [99]))
    >>> s["completed"], s["p99_ttft_ms"], s["targets"]["direct"]["failed"], s["contaminated"]
    (0, None, 0, False)
    """
    measured = [r for r in facts.records if r.phase != "warmup"]
    all_itl = [g for name in facts.targets for g in facts.itl_ms.get(name, ())]
    out: dict[str, Any] = {"schema_version": SUMMARY_SCHEMA_VERSION, **facts.header}
    out["duration"] = facts.duration_s
    out["warmups"] = len(facts.records) - len(measured)
    out.update(client_keys(measured, all_itl, facts.duration_s, facts.percentiles))
    out["contamination_advice"] = CONTAMINATION_ADVICE if out["contaminated"] else None
    out.update(combined_keys(facts.servers, facts.percentiles))
    out["failures"] = failure_tally(measured)
    out["targets"] = {
        name: {
            **client_keys(
                [r for r in measured if r.target == name],
                facts.itl_ms.get(name, ()),
                facts.duration_s,
                facts.percentiles,
            ),
            "peak_waiting": _target_peak(name, facts.servers),
        }
        for name in facts.targets
    }
    out["servers"] = parts_by_source(facts.servers)
    out["parts_by_bucket"] = parts_by_bucket([r for r in measured if r.ok], "bench")
    data: dict[str, Any] = rounded(out)
    BenchSummary.validate_written(data)  # a summary that breaks its schema is a bug: fail here
    return data


def _target_peak(name: str, servers: Sequence[ServerParts]) -> float | None:
    return next((p.gauges.get("peak_waiting") for p in servers if name in p.targets), None)


def rounded(value: Any, *, key: str = "") -> Any:
    """Figures rounded for people: ms to 3 decimals, rates, shares and ratios to 4.

    >>> rounded({"median_ttft_ms": 84.00939360000001, "prefix_hit_rate": 0.987654321})
    {'median_ttft_ms': 84.009, 'prefix_hit_rate': 0.9877}
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return round(value, 4 if any(w in key for w in ("rate", "share", "ratio")) else 3)
    if isinstance(value, dict):
        return {k: rounded(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, key=key) for v in value]
    return value
