"""A light ``/metrics`` scrape for sampling under load: only the series the sampler reads.

Parsing a whole vLLM exposition costs ~12 ms of CPU here, on the event loop that stamps
every request's tokens: four times a second per server that would shift measured TTFTs.
The sampler only needs a few gauges and counters, so lines of other families are dropped
before parsing (~0.8 ms). The first and last snapshots of a run, taken while no request is
in flight, are full scrapes (:func:`ttftscope.metrics.scrape.ascrape_metrics`): their histogram
deltas give the run's per-part aggregates.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import httpx

from ttftscope.errors import MetricsError
from ttftscope.metrics.names import COUNTERS, GAUGES
from ttftscope.metrics.prom import MetricsSnapshot, parse_metrics
from ttftscope.metrics.scrape import MAX_BODY_BYTES, decode_body, safe_url, transport_error

GATEWAY_PREFIX = "ttftscope_gateway_"
_GAUGE_KEYS = ("running", "waiting", "kv_cache_usage")
_COUNTER_KEYS = ("prefix_queries", "prefix_hits")
FAMILIES: frozenset[str] = frozenset(
    {name for table in GAUGES.values() for k in _GAUGE_KEYS for name in table.get(k, ())}
    | {name for table in COUNTERS.values() for k in _COUNTER_KEYS for name in table.get(k, ())}
)
_SAMPLES = frozenset(FAMILIES | {f + "_total" for f in FAMILIES})


def _wanted_sample(name: str) -> bool:
    if name.startswith(GATEWAY_PREFIX):
        return not name.endswith(("_bucket", "_created"))
    return name in _SAMPLES


def filter_exposition(text: str) -> str:
    """Only the lines (samples and their ``# TYPE``/``# HELP``) the sampler reads.

    >>> print(filter_exposition('# TYPE vllm:num_requests_waiting gauge\\n'
    ...     'vllm:num_requests_waiting{model_name="m"} 2\\nvllm:other 1\\n'), end="")
    # TYPE vllm:num_requests_waiting gauge
    vllm:num_requests_waiting{model_name="m"} 2
    """
    keep = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            family = parts[2] if len(parts) > 2 else ""
            if family in FAMILIES or family.startswith(GATEWAY_PREFIX):
                keep.append(line)
            continue
        end = next((i for i, ch in enumerate(line) if ch in "{ \t"), len(line))
        if _wanted_sample(line[:end]):
            keep.append(line)
    return "\n".join(keep) + "\n"


def _status_error(url: str, status: int) -> MetricsError:
    if status == 404:
        return MetricsError(
            f"{safe_url(url)} answered 404 Not Found",
            hint="this target exposes no /metrics; its queue cannot be sampled",
        )
    return MetricsError(
        f"{safe_url(url)} answered HTTP {status}",
        hint="check that the target's /metrics is reachable with the run's credentials",
    )


async def light_scrape(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 2.0,
) -> MetricsSnapshot:
    """GET ``url`` and parse only the sampled series; :class:`MetricsError` on any fault.

    >>> import asyncio
    >>> async def main() -> MetricsSnapshot:
    ...     async with httpx.AsyncClient() as client:
    ...         return await light_scrape(client, metrics_url)
    >>> asyncio.run(main()).value("vllm:num_requests_waiting")
    0.0
    """
    start = time.monotonic_ns()
    buf = bytearray()
    try:
        async with client.stream("GET", url, headers=dict(headers or {}), timeout=timeout) as resp:
            if resp.status_code != 200:
                raise _status_error(url, resp.status_code)
            async for chunk in resp.aiter_bytes():
                buf += chunk
                if len(buf) > MAX_BODY_BYTES:
                    raise MetricsError(
                        f"{safe_url(url)} sent more than {MAX_BODY_BYTES // 2**20} MiB",
                        hint="check the target's metrics URL",
                    )
    except httpx.HTTPError as exc:
        # worded, and ``transport`` named, as the full scrape and every client word them
        raise transport_error(url, exc, timeout).with_hint(
            "the target may be down or overloaded"
        ) from None
    text, _note = decode_body(bytes(buf))
    snap = parse_metrics(filter_exposition(text), source=safe_url(url))
    return dataclasses.replace(snap, scrape_s=(time.monotonic_ns() - start) / 1e9)
