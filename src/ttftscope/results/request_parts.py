"""Per-request TTFT parts by context bucket and target: median, p90, how many, from where.

Under concurrency a /metrics histogram cannot say which observation is whose, so a bench's
records had no server parts; with traces each request carries its own (``part_sources``
says ``span``). This module groups what the records hold, whatever filled them: per context
bucket and target, the median and p90 of each part over the requests that had it, how many
had it and where their values came from. Bench writes the groups into its summary
(``parts_by_bucket``) and the report and the bench's terminal show them; with no per-request
part anywhere they keep the run-wide histogram view and say so (:data:`NO_PARTS`).

The gateway's own work is part of "outside the server" (client TTFT − server TTFT), so the
two are shown side by side, never stacked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ttftscope.records import PartSource, RequestRecord, ServerPart
from ttftscope.results.parts import Buckets, part_ms, series_name
from ttftscope.results.runs import RunKind
from ttftscope.stats import median, percentile

__all__ = [
    "NO_PARTS",
    "REQUEST_PARTS",
    "REQUEST_PART_LABELS",
    "RequestPart",
    "has_request_parts",
    "part_source",
    "part_value",
    "parts_by_bucket",
]

RequestPart = Literal["queue", "prefill", "server_frontend", "gateway", "outside_server"]
# from the engine outwards, as a request's server figures are read
REQUEST_PARTS: tuple[RequestPart, ...] = (
    "queue",
    "prefill",
    "server_frontend",
    "gateway",
    "outside_server",
)
REQUEST_PART_LABELS: dict[RequestPart, str] = {
    "queue": "queue",
    "prefill": "prefill",
    "server_frontend": "server front end",
    "gateway": "gateway",
    "outside_server": "outside the server",
}
NO_PARTS = (
    "no request has its own parts (no traces received, or a bench's requests overlapped so "
    "/metrics histograms cannot tell whose time is whose): the server's figures, where "
    "there are any, are run-wide means from its histograms"
)
# which recorded source tells where a part's value came from (outside = client − server TTFT)
_SOURCE_KEY: dict[RequestPart, ServerPart] = {
    "queue": "queue_ms",
    "prefill": "prefill_ms",
    "server_frontend": "server_frontend_ms",
    "outside_server": "server_ttft_ms",
}


def part_value(record: RequestRecord, part: RequestPart) -> float | None:
    """One request's part in ms (outside the server as :func:`~.parts.part_ms` has it).

    >>> r = RequestRecord(run_id="r", index=0, variant="gateway", phase="warm", ok=True,
    ...                   gateway_ms=1.5, queue_ms=2.0)
    >>> part_value(r, "gateway"), part_value(r, "queue"), part_value(r, "prefill")
    (1.5, 2.0, None)
    """
    if part == "gateway":
        return record.gateway_ms
    return part_ms(record, part)


def part_source(record: RequestRecord, part: RequestPart) -> PartSource:
    """Where the request's part came from: ``none`` without a value; a value with no recorded
    source predates traces, when server figures came only from histograms.

    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   queue_ms=2.0, prefill_ms=5.0, part_sources={"queue_ms": "span"})
    >>> part_source(r, "queue"), part_source(r, "prefill"), part_source(r, "gateway")
    ('span', 'histogram', 'none')
    """
    if part_value(record, part) is None:
        return "none"
    if part == "gateway":  # only the gateway's own span measures it
        return "span"
    told = record.part_sources.get(_SOURCE_KEY[part])
    return told if told in ("span", "histogram") else "histogram"


def _part_keys(records: Sequence[RequestRecord], part: RequestPart) -> dict[str, Any]:
    values = [v for r in records if (v := part_value(r, part)) is not None]
    sources: dict[str, int] = {}
    for r in records:
        source = part_source(r, part)
        if source != "none":
            sources[source] = sources.get(source, 0) + 1
    return {
        f"median_{part}_ms": median(values),
        f"p90_{part}_ms": percentile(values, 90),
        f"{part}_requests": len(values),
        f"{part}_sources": dict(sorted(sources.items())),
    }


def parts_by_bucket(records: Iterable[RequestRecord], kind: RunKind) -> list[dict[str, Any]]:
    """One group per context bucket and target (or variant), smallest context first.

    ``records`` are the requests latency is made of (``latency_samples``). Each group has
    ``context_tokens`` (the bucket's lower bound), ``context`` (its label), ``target``,
    ``requests``, and per part ``median_/p90_{part}_ms``, ``{part}_requests`` and
    ``{part}_sources`` (requests per source).

    >>> r = [RequestRecord(run_id="r", index=i, variant="chat", phase="warm", ok=True,
    ...                    target="direct", prompt_tokens=9000, queue_ms=float(i),
    ...                    part_sources={"queue_ms": "span"}) for i in range(3)]
    >>> (g,) = parts_by_bucket(r, "bench")
    >>> g["context"], g["requests"], g["median_queue_ms"], g["queue_sources"]
    ('8K–16K', 3, 1.0, {'span': 3})
    """
    records = list(records)
    buckets = Buckets.for_records(records, kind)
    names = {name: i for i, name in enumerate(dict.fromkeys(map(series_name, records)))}
    grouped: dict[tuple[int, str], list[RequestRecord]] = {}
    for r in records:
        grouped.setdefault((buckets.key(r), series_name(r)), []).append(r)
    out: list[dict[str, Any]] = []
    for (key, name), mine in sorted(grouped.items(), key=lambda g: (g[0][0], names[g[0][1]])):
        group: dict[str, Any] = {
            "context_tokens": key,
            "context": buckets.label(key).removesuffix(" tokens"),
            "target": name,
            "requests": len(mine),
        }
        for part in REQUEST_PARTS:
            group.update(_part_keys(mine, part))
        out.append(group)
    return out


def has_request_parts(groups: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any group has a request with any of its own parts.

    >>> has_request_parts([{"queue_requests": 0}]), has_request_parts([{"gateway_requests": 2}])
    (False, True)
    """
    return any(g.get(f"{p}_requests") for g in groups for p in REQUEST_PARTS)
