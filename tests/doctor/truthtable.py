"""The doctor's truth table: a bottleneck injected, the doctor's real pipeline, the verdict.

Each scenario starts a :class:`~tests.doctor.scenarioserver.ScenarioServer` with one cost
injected, runs the real probe against it (its records written as ``ttftscope probe`` writes
them), reads them back and diagnoses them as ``ttftscope doctor --no-live --records DIR``
does. The row says what was injected (the server's own accounting: the median of what it
charged the last warm requests, those at the largest context) and what the doctor named
first, with its saving. Used by ``tests/doctor/test_truth_table.py`` and
``benchmarks/doctor_truth_table.py``.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.doctor.scenarioserver import MODEL, Charged, Costs, ScenarioServer
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.loader import load_settings
from ttftscope.doctor.diagnose import Inputs, diagnose
from ttftscope.doctor.gather import read_recorded
from ttftscope.findings import Diagnosis, FindingId
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.records import RecordWriter

SIZES = (2000, 8000)
REPEAT = 3
TOLERANCE = 0.25  # a saving within 25% of the injected cost
HEALTHY = "no problem found"


@dataclass(frozen=True)
class Scenario:
    """One injected bottleneck: the costs, the finding expected first, the injected part."""

    name: str
    expected: FindingId | None
    costs: Costs
    injected: Callable[[Charged], float] | None = None  # None: no time to save (429s)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("healthy", None, Costs()),
    Scenario("network delay", "network-path", Costs(network_s=0.3), lambda c: c.network_ms),
    Scenario(
        "front end growth",
        "tokenization-bound",
        Costs(frontend_s_per_1k=0.036),
        lambda c: c.frontend_ms,
    ),
    Scenario("queueing", "queueing", Costs(queue_s=0.3), lambda c: c.queue_ms),
    Scenario(
        "prefill, cache off",
        "prefix-cache-off",
        Costs(prefill_s_per_1k=0.04, prefix_cache=False),
        lambda c: c.missed_prefill_ms,
    ),
    Scenario("429s", "rate-limited", Costs(every_429=4)),
)


@dataclass(frozen=True)
class Row:
    """What was injected and what the doctor said."""

    scenario: str
    expected: str
    named: str
    saving_ms: float | None
    injected_ms: float | None
    raised: tuple[str, ...]  # every finding above "info", in the doctor's order

    @property
    def ok(self) -> bool:
        """Named first, nothing else above info, and the saving within 25% of the cost."""
        if self.named != self.expected or len(self.raised) > 1:
            return False
        if self.injected_ms is None:
            return True
        if self.saving_ms is None:
            return False
        return abs(self.saving_ms - self.injected_ms) <= TOLERANCE * self.injected_ms


def _probe(srv: ScenarioServer, out: Path) -> None:
    ep = Endpoint(base_url=f"{srv.root}/v1", metrics_url=f"{srv.root}/metrics", model=MODEL)
    opts = ProbeOptions(
        context_tokens=SIZES, repeat=REPEAT, num_warmups=1, max_tokens=4, metrics_settle_s=5.0
    )
    with RecordWriter(out / "probe-truth.jsonl") as writer:
        asyncio.run(run_probe(ep, opts, writer=writer))


def doctor_records(out: Path) -> Diagnosis:
    """What ``ttftscope doctor --no-live --records OUT`` concludes (no settings, no logs)."""
    loaded = load_settings(env={}, cwd=out)
    return diagnose(Inputs(loaded=loaded, cwd=out, recorded=read_recorded([out])))


def _injected(s: Scenario, charged: list[Charged]) -> float | None:
    if s.injected is None:
        return None
    return round(statistics.median(s.injected(c) for c in charged[-REPEAT:]), 1)


def run_scenario(s: Scenario, out: Path) -> Row:
    """Inject, probe, diagnose: one row of the table."""
    out.mkdir(parents=True, exist_ok=True)
    with ScenarioServer(s.costs) as srv:
        _probe(srv, out)
        charged = list(srv.charged)
    found = doctor_records(out)
    raised = tuple(f.id for f in found.findings if f.gates)
    first = next((f for f in found.findings if f.gates), None)
    return Row(
        scenario=s.name,
        expected=s.expected or HEALTHY,
        named=HEALTHY if first is None else first.id,
        saving_ms=None if first is None else first.saving_ms,
        injected_ms=_injected(s, charged),
        raised=raised,
    )
