"""Finding: the path to the server costs more than the server (outside the server dominates).

Outside the server is the client's TTFT less the server's (network, HTTP, JSON, the client's
serialization), per request. Judged one series at a time (a probe at its largest context, a
bench target over its workload; a probe's text/ids A/B variants are instruments, not a
workload), on requests the server measured, when the median TTFT is long enough to matter.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.findings import Evidence, Finding
from ttftscope.results.parts import records_breakdown, series_scope, split_series
from ttftscope.results.runs import Run

__all__ = ["network_findings"]

FAST_MS = 50.0  # a median TTFT under this has nothing worth removing
MIN_SHARE = 0.35
MIN_MS = 20.0
_INSTRUMENTS = ("text", "ids")


def _finding(run: Run, name: str, where: str, records_n: int, value: float, ttft: float) -> Finding:
    share = value / ttft
    return Finding(
        id="network-path",
        severity="warning",
        title=f"{share:.0%} of TTFT is spent outside the server ({name}{where})",
        evidence=[
            Evidence(
                fact=f"median outside the server (serialization, network, HTTP) {value:.0f} ms "
                f"of {ttft:.0f} ms median TTFT over {records_n} requests",
                source=", ".join(str(p) for p in run.sources),
            )
        ],
        remedy=(
            "keep connections alive, remove proxies in between, and run the client near the "
            "server: the path to the server costs more than the server"
        ),
        saving_ms=round(value, 1),
    )


def network_findings(runs: Sequence[Run]) -> list[Finding]:
    """Series where outside the server is the largest share of a TTFT worth shortening."""
    out: list[Finding] = []
    for run in runs:
        series = split_series(run)
        for s in [s for s in series if s.name not in _INSTRUMENTS] or series:
            where, records = series_scope(s)
            found = records_breakdown(records)
            if found is None or found.ttft_ms < FAST_MS:
                continue
            value, share = found.part("outside_server"), found.share("outside_server")
            if value is None or share is None or share < MIN_SHARE or value < MIN_MS:
                continue
            out.append(_finding(run, s.name, where, found.n, value, found.ttft_ms))
    return out
