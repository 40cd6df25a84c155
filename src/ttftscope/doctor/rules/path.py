"""Finding: the path to the server costs more than the server (outside the server dominates).

Outside the server is the client's TTFT less the server's (network, HTTP, JSON, the client's
serialization), per request. Judged one series at a time (a probe at its largest context, a
bench target over its workload; a probe's A/B arms are instruments, not a workload: text and
ids, and the direct arm of its gateway A/B, whose path is its chat series' path, measured
there without the gateway's requests in between: in the demo the gateway runs in the probe's
own process, and its work after a gateway request held the next direct request's send back
849 ms, ttftscope's own work that the remedy of this finding cannot remove), on requests the
server measured, when the median TTFT is long enough to matter.
Through the ttftscope gateway (a series named for it, or records the gateway stamped), the
gateway is in that path by design: the advice is then about where it runs and what it costs,
not "remove proxies"; where the run also measured the server direct, the saving is what the
gateway's series costs over direct, and a gateway at least as fast as direct is only "info"
(its hop is paid for). The part must be sustained: the low end of its median's 95% interval
(bootstrap) at least :data:`MIN_MS` over at least :data:`~ttftscope.doctor.abtest.MIN_PAIRS`
requests (the interval of one request is that request), so a loaded machine's stall in a few
requests is not called the path, nor is the one request another client's traffic left over.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.doctor.abtest import MIN_PAIRS, bootstrap_interval
from ttftscope.findings import Evidence, Finding, Severity
from ttftscope.records import RequestRecord
from ttftscope.results.parts import (
    Breakdown,
    Series,
    part_ms,
    records_breakdown,
    series_scope,
    split_series,
)
from ttftscope.results.runs import Run
from ttftscope.stats import median

__all__ = ["GATEWAY_PATH_REMEDIES", "PAID_FOR", "VIA_GATEWAY", "network_findings"]

FAST_MS = 50.0  # a median TTFT under this has nothing worth removing
MIN_SHARE = 0.35
MIN_MS = 20.0
_INSTRUMENTS = ("text", "ids")
_PROBE_INSTRUMENTS = (*_INSTRUMENTS, "direct")
_DIRECT = (
    "keep connections alive, remove proxies in between, and run the client near the "
    "server: the path to the server costs more than the server"
)
VIA_GATEWAY = (
    "the ttftscope gateway is on this path by design: run it on the server's host (one "
    "hop to the server, not two), keep the client's connections to it alive, and measure "
    "what it adds against the server direct (`ttftscope bench --target direct --target "
    "gateway=URL`)"
)

PAID_FOR = (
    "nothing to change on this path: through the gateway, its own hop included, the median "
    "TTFT is no longer than direct to the server"
)


# what the network path says about the gateway's own path (doctor.rules.gatewaynet folds it)
GATEWAY_PATH_REMEDIES = (VIA_GATEWAY, PAID_FOR)


def _via_gateway(name: str, records: Sequence[RequestRecord]) -> bool:
    return "gateway" in name or any(r.gateway_ms is not None for r in records)


def _gateway_fact(records: Sequence[RequestRecord]) -> list[str]:
    own = median(r.gateway_ms for r in records)
    if own is None:
        return []
    return [f"median {own:.0f} ms of it in the gateway's own work (received to sent upstream)"]


def _interval(records: Sequence[RequestRecord]) -> tuple[float, float, int] | None:
    """The 95% interval of the median outside-the-server time, and how many requests."""
    values = [
        v
        for r in records
        if r.server_ttft_ms is not None and (v := part_ms(r, "outside_server")) is not None
    ]
    if len(values) < MIN_PAIRS:
        return None  # too few to tell the path from a stall
    low, high = bootstrap_interval(values)
    return low, high, len(values)


def _direct_ttft(series: Sequence[Series]) -> float | None:
    """The median TTFT of the run's direct series at its judged scope, if the run has one."""
    direct = next((s for s in series if s.name == "direct"), None)
    found = None if direct is None else records_breakdown(series_scope(direct)[1])
    return None if found is None else found.ttft_ms


def _finding(
    run: Run,
    name: str,
    where: str,
    records: Sequence[RequestRecord],
    found: Breakdown,
    interval: tuple[float, float, int],
    direct_ms: float | None = None,
) -> Finding:
    value, ttft = found.part("outside_server") or 0.0, found.ttft_ms
    share = value / ttft
    gateway = _via_gateway(name, records)
    low, high, n = interval
    facts = [
        f"median outside the server (serialization, network, HTTP) {value:.0f} ms "
        f"of {ttft:.0f} ms median TTFT over {found.n} requests (95% interval {low:,.0f} to "
        f"{high:,.0f} ms, {n} requests)",
        *(_gateway_fact(records) if gateway else []),
    ]
    title = f"{share:.0%} of TTFT is spent outside the server ({name}{where})"
    remedy, saving = (VIA_GATEWAY if gateway else _DIRECT), value
    severity: Severity = "warning"
    if gateway and direct_ms is not None:
        # one story: the gateway's path is worth shortening by what it costs over direct
        facts.append(f"median TTFT {ttft:.0f} ms through the gateway vs {direct_ms:.0f} ms direct")
        saving = max(ttft - direct_ms, 0.0)
        if saving <= 0:
            title += ": the gateway's hop is paid for"
            remedy, severity = PAID_FOR, "info"
    return Finding(
        id="network-path",
        severity=severity,
        title=title,
        evidence=[Evidence(fact=f, source=", ".join(str(p) for p in run.sources)) for f in facts],
        remedy=remedy,
        saving_ms=round(saving, 1) if saving > 0 else None,
        part_ms=value,
    )


def network_findings(runs: Sequence[Run]) -> list[Finding]:
    """Series where outside the server is the largest share of a TTFT worth shortening."""
    out: list[Finding] = []
    for run in runs:
        series = split_series(run)
        instruments = _PROBE_INSTRUMENTS if run.kind == "probe" else _INSTRUMENTS
        for s in [s for s in series if s.name not in instruments] or series:
            where, records = series_scope(s)
            found = records_breakdown(records)
            if found is None or found.ttft_ms < FAST_MS:
                continue
            value, share = found.part("outside_server"), found.share("outside_server")
            if value is None or share is None or share < MIN_SHARE or value < MIN_MS:
                continue
            interval = _interval(records)
            if interval is None or interval[0] < MIN_MS:
                continue  # not sustained: a stall of a few requests, not the path
            direct = _direct_ttft(series) if _via_gateway(s.name, records) else None
            out.append(_finding(run, s.name, where, records, found, interval, direct))
    return out
