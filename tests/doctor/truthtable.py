"""The doctor's truth table: a bottleneck injected, the doctor's real pipeline, the verdict.

Each scenario starts a :class:`~tests.doctor.scenarioserver.ScenarioServer` with one cost
injected, puts a load on it and records it as ttftscope does (the real probe, written as
``ttftscope probe`` writes it; a bench run of concurrent sessions, as ``ttftscope bench``;
or an application recording itself with ``ttftscope.instrument``), reads the records back
and diagnoses them as ``ttftscope doctor --no-live --records DIR`` does. The row says what
was injected (the server's own accounting: the median of what it charged the last warm
requests, those at the largest context; for a bench, the mean over its requests, as the
server's histograms count them) and what the doctor named first, with its saving. Used by
``tests/doctor/test_truth_table.py`` and ``benchmarks/doctor_truth_table.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tokenizers
from openai import OpenAI

from tests.doctor.scenarioserver import MODEL, Charged, Costs, ScenarioServer, tokens_of
from ttftscope import Settings, instrument, instrumentation
from ttftscope.bench.options import BenchOptions, ContextSizes
from ttftscope.bench.runner import run_bench
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.loader import load_settings
from ttftscope.config.schema import DebugSettings
from ttftscope.doctor.diagnose import Inputs, diagnose
from ttftscope.doctor.gather import read_recorded
from ttftscope.findings import Diagnosis, FindingId
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.records import RecordWriter
from ttftscope.tokenization.loader import Tokenizer

SIZES = (2000, 8000)
CLIENT_MS_PER_1K_CHARS = 9.0  # ~34K characters at 8,000 tokens: ~300 ms
REPEAT = 5  # the median of five warm requests: a stall of the loaded machine in one or two
# of them does not move it
TOLERANCE = 0.25  # a saving within 25% of the injected cost
HEALTHY = "no problem found"
BENCH_SESSIONS = 4


@dataclass(frozen=True)
class Scenario:
    """One injected bottleneck: the costs, the finding expected first, the injected part."""

    name: str
    expected: FindingId | None
    costs: Costs
    injected: Callable[[Charged], float] | None = None  # None: no time to save (429s)
    client_ms_per_1k_chars: float = 0.0  # the client tokenizes first, at this cost
    says: str = ""  # what the named finding's title must say (which part, where one id
    # covers several)
    load: Literal["probe", "bench", "instrument"] = "probe"  # what runs against the server
    on_non_ascii: bool = False  # the injected cost is the non-ASCII requests' (else ASCII's)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("healthy", None, Costs()),
    Scenario("network delay", "network-path", Costs(network_s=0.3), lambda c: c.network_ms),
    Scenario(
        "front end growth",
        "tokenization-bound",
        Costs(frontend_s_per_1k=0.036),
        lambda c: c.frontend_ms,
        says="server-side tokenization",
    ),
    Scenario(
        "queueing (4 on 2)",
        "queueing",
        Costs(slots=2, decode_s=0.3),
        lambda c: c.queue_ms,
        load="bench",
    ),
    Scenario(
        "prefill, cache off",
        "prefix-cache-off",
        Costs(prefill_s_per_1k=0.04, prefix_cache=False),
        lambda c: c.missed_prefill_ms,
    ),
    Scenario("429s", "rate-limited", Costs(every_429=4)),
    Scenario(
        "non-ASCII slow path",
        "non-ascii-slow-path",
        Costs(frontend_s_per_1k=0.0015, non_ascii_factor=25.0),
        lambda c: c.non_ascii_ms,
        on_non_ascii=True,
    ),
    Scenario(
        "client tokenization",
        "tokenization-bound",
        Costs(),
        lambda c: CLIENT_MS_PER_1K_CHARS * c.content_chars / 1000,
        client_ms_per_1k_chars=CLIENT_MS_PER_1K_CHARS,
        says="client-side tokenization",
        load="instrument",
    ),
    Scenario(
        "time in the prompt",
        "dynamic-prefix",
        Costs(prefill_s_per_1k=0.04, dynamic_system=True),
        lambda c: c.missed_prefill_ms,
    ),
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
    title: str = ""  # the named finding's title
    says: str = ""  # what it must say

    @property
    def ok(self) -> bool:
        """Named first, nothing else above info, and the saving within 25% of the cost."""
        if self.named != self.expected or len(self.raised) > 1 or self.says not in self.title:
            return False
        if self.injected_ms is None:
            return True
        if self.saving_ms is None:
            return False
        return abs(self.saving_ms - self.injected_ms) <= TOLERANCE * self.injected_ms


class SlowTokenizer(Tokenizer):
    """The client's tokenizer, costing ``ms_per_1k_chars`` (4 characters a token)."""

    def __init__(self, ms_per_1k_chars: float) -> None:
        super().__init__(tokenizers.Tokenizer(tokenizers.models.BPE()), Path("slow"), "slow")
        self.ms_per_1k_chars = ms_per_1k_chars

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        time.sleep(self.ms_per_1k_chars * len(text) / 1e6)  # the injected cost itself
        return [1] * tokens_of(text)


def _probe(srv: ScenarioServer, out: Path, s: Scenario) -> None:
    ep = Endpoint(base_url=f"{srv.root}/v1", metrics_url=f"{srv.root}/metrics", model=MODEL)
    opts = ProbeOptions(
        context_tokens=SIZES,
        repeat=REPEAT,
        num_warmups=1,
        max_tokens=4,
        metrics_settle_s=5.0,
        non_ascii=True,  # as the live doctor's probe: its chat again in non-ASCII letters
    )
    with RecordWriter(out / "probe-truth.jsonl") as writer:
        asyncio.run(run_probe(ep, opts, writer=writer))


def _instrumented(srv: ScenarioServer, out: Path, s: Scenario) -> None:
    """The user's own application: it tokenizes each prompt with its (slow) tokenizer and
    sends it with the ``openai`` SDK, recorded by ``ttftscope.instrument`` as an application
    records itself (``instrument.jsonl``): the probe's own tokenization is ttftscope's, never
    the user's client's. A conversation per size, growing a turn a request, one at a time."""
    settings = Settings(debug=DebugSettings(log_token_count=True))
    tok = SlowTokenizer(s.client_ms_per_1k_chars)
    client = instrument(
        OpenAI(api_key="k", base_url=f"{srv.root}/v1"),
        settings=settings,
        records=out,
        tokenizer=tok,
    )
    for size in SIZES:
        context = "".join(f"line {i} of the context\n" for i in range(size * 4 // 22))
        for i in range(2 + REPEAT):  # as the probe: a cold request, a warm-up, then REPEAT
            prompt = f"{context}turn {i}: continue.\n"
            for _ in client.completions.create(
                model=MODEL, prompt=prompt, max_tokens=4, stream=True
            ):
                pass
            instrumentation(client).flush()  # one call at a time: each its own /metrics delta
    instrumentation(client).close()


def _bench(srv: ScenarioServer, out: Path) -> None:
    """Four agent sessions at once, each sending its next turn as soon as its last answer is
    in (``ttftscope bench --sessions 4 --think-time 0``): on two slots, half of them wait."""
    ep = Endpoint(
        base_url=f"{srv.root}/v1", metrics_url=f"{srv.root}/metrics", model=MODEL, max_tokens=4
    )
    opts = BenchOptions(
        sessions=BENCH_SESSIONS,
        context_tokens=ContextSizes("range", (2000, 4000)),
        num_prompts=4 * BENCH_SESSIONS,
        think_time_s=0.0,
        num_warmups=0,
        max_tokens=4,
        sample_interval_s=0.1,
    )
    asyncio.run(run_bench(ep, opts, result_dir=out / "bench", count_tokens=tokens_of))


def doctor_records(out: Path) -> Diagnosis:
    """What ``ttftscope doctor --no-live --records OUT`` concludes (no settings; the request
    log in OUT read as the doctor reads logs in a records folder)."""
    loaded = load_settings(env={}, cwd=out)
    return diagnose(Inputs(loaded=loaded, cwd=out, recorded=read_recorded([out])))


def _injected(s: Scenario, charged: list[Charged]) -> float | None:
    if s.injected is None:
        return None
    if s.load == "bench":
        return round(statistics.mean(s.injected(c) for c in charged), 1)
    series = [c for c in charged if (c.non_ascii_chars > c.content_chars / 2) == s.on_non_ascii]
    return round(statistics.median(s.injected(c) for c in series[-REPEAT:]), 1)


def run_scenario(s: Scenario, out: Path) -> Row:
    """Inject, probe, diagnose: one row of the table."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "requests.jsonl" if s.costs.dynamic_system else None
    with ScenarioServer(s.costs, request_log=log) as srv:
        if s.load == "instrument":
            _instrumented(srv, out, s)
        elif s.load == "bench":
            _bench(srv, out)
        else:
            _probe(srv, out, s)
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
        title="" if first is None else first.title,
        says=s.says,
    )
