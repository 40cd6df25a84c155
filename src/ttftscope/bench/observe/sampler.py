"""Read every target server's ``/metrics`` while a bench runs, into ``samples.jsonl``.

Four times a second (``--sample-interval``) each distinct metrics URL is scraped lightly
(:mod:`.lightscrape`): requests running and waiting, KV cache usage, prefix-cache hits and
queries, and a gateway's ``ttftscope_gateway_*`` series. Every scrape becomes one
:class:`ScrapeSample` line, flushed as it goes. Before the measured requests and after the last
one has settled, each server is scraped in full: the two snapshots' histogram deltas are
the run's server-side aggregates (:attr:`MetricsSource.first`, :attr:`MetricsSource.last`).

A scrape that fails is a sample with ``ok=False`` and its reason, never the end of the
run; a URL that answers 404 is not asked again.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
from pydantic import BaseModel, Field

from ttftscope.bench.observe.lightscrape import GATEWAY_PREFIX, light_scrape
from ttftscope.bench.output.sink import JsonlSink
from ttftscope.bench.send.pacing import sleep_until
from ttftscope.bench.targets import Target
from ttftscope.errors import MetricsError
from ttftscope.metrics.names import Reader, detect_engine
from ttftscope.metrics.prom import MetricsDelta, MetricsSnapshot, metrics_delta
from ttftscope.metrics.scrape import ascrape_metrics, safe_url

SAMPLE_SCHEMA_VERSION = 1


class ScrapeSample(BaseModel):
    """One scrape of one server while the run went on (a line of ``samples.jsonl``).

    >>> ScrapeSample(t_s=0.25, t_wall=0.0, source="http://h/metrics", ok=True, waiting=2).waiting
    2.0
    """

    schema_version: int = SAMPLE_SCHEMA_VERSION
    t_s: float  # seconds since the measured requests began
    t_wall: float
    source: str  # the metrics URL (no credentials)
    targets: list[str] = Field(default_factory=list)
    ok: bool
    error: str | None = None
    scrape_ms: float | None = None
    engine: str | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    prefix_queries: float | None = None  # counters as exposed (cumulative since start)
    prefix_hits: float | None = None
    gateway: dict[str, float] = Field(default_factory=dict)


@dataclass
class Gauge:
    """Peak and mean of one sampled gauge.

    >>> g = Gauge(); g.add(1.0); g.add(None); g.add(3.0); (g.peak, g.mean)
    (3.0, 2.0)
    """

    count: int = 0
    total: float = 0.0
    peak: float | None = None

    def add(self, value: float | None) -> None:
        """Count one sampled value (None: the server did not say)."""
        if value is None:
            return
        self.count += 1
        self.total += value
        self.peak = value if self.peak is None else max(self.peak, value)

    @property
    def mean(self) -> float | None:
        """The mean of the values counted (None before any)."""
        return self.total / self.count if self.count else None


@dataclass
class MetricsSource:
    """One metrics URL and the targets behind it, with what sampling saw of it."""

    url: str
    targets: list[str]
    headers: Mapping[str, str]
    first: MetricsSnapshot | None = None
    last: MetricsSnapshot | None = None
    latest: ScrapeSample | None = None
    waiting: Gauge = field(default_factory=Gauge)
    running: Gauge = field(default_factory=Gauge)
    kv_cache_usage: Gauge = field(default_factory=Gauge)
    errors: int = 0
    disabled: str | None = None  # why this URL is no longer scraped
    notes: list[str] = field(default_factory=list)

    @property
    def shown(self) -> str:
        """The URL as messages and files show it (no credentials, no query)."""
        return safe_url(self.url)


def sources_of(targets: Sequence[Target]) -> list[MetricsSource]:
    """One :class:`MetricsSource` per distinct metrics URL, naming every target behind it.

    >>> t = [Target("a", "u", "http://h/metrics"), Target("b", "v", "http://h/metrics")]
    >>> [(s.url, s.targets) for s in sources_of(t)]
    [('http://h/metrics', ['a', 'b'])]
    """
    out: dict[str, MetricsSource] = {}
    for t in targets:
        src = out.setdefault(t.metrics_url, MetricsSource(t.metrics_url, [], t.scrape_headers))
        src.targets.append(t.name)
    return list(out.values())


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def sample_of(snap: MetricsSnapshot, src: MetricsSource, t_s: float) -> ScrapeSample:
    """What one light snapshot says, as a :class:`ScrapeSample`.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> snap = parse_metrics('# TYPE vllm:num_requests_waiting gauge\\n'
    ...                      'vllm:num_requests_waiting 2\\n')
    >>> sample_of(snap, MetricsSource("http://h/metrics", ["direct"], {}), 0.5).waiting
    2.0
    """
    engine = detect_engine(snap)
    rd = Reader(snap, engine, {})
    summed: dict[str, float] = {}
    for (name, _labels), v in snap.samples.items():
        if name.startswith(GATEWAY_PREFIX) and math.isfinite(v):
            summed[name] = summed.get(name, 0.0) + v
    return ScrapeSample(
        t_s=t_s,
        t_wall=time.time(),
        source=src.shown,
        targets=src.targets,
        ok=True,
        scrape_ms=None if snap.scrape_s is None else snap.scrape_s * 1000.0,
        engine=engine,
        running=_finite(rd.gauge("running")),
        waiting=_finite(rd.gauge("waiting")),
        kv_cache_usage=_finite(rd.gauge("kv_cache_usage")),
        prefix_queries=_finite(rd.counter("prefix_queries")),
        prefix_hits=_finite(rd.counter("prefix_hits")),
        gateway=summed,
    )


class Sampler:
    """Scrapes every source each ``interval`` s until stopped; keeps first/last snapshots."""

    def __init__(
        self,
        sources: list[MetricsSource],
        client: httpx.AsyncClient,
        sink: JsonlSink,
        *,
        interval_s: float = 0.25,
        on_sample: Callable[[ScrapeSample], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sources, self.client, self.sink = sources, client, sink
        self.interval_s, self.on_sample, self.clock = interval_s, on_sample, clock
        self.t0 = clock()
        self.count = 0

    def waiting(self, target: str) -> float | None:
        """The latest sampled waiting queue of the server behind ``target``."""
        for src in self.sources:
            if target in src.targets and src.latest is not None:
                return src.latest.waiting
        return None

    async def _tick(self, src: MetricsSource) -> None:
        if src.disabled is not None:
            return
        t_s = self.clock() - self.t0
        try:
            snap = await light_scrape(self.client, src.url, headers=src.headers)
        except MetricsError as exc:
            src.errors += 1
            if "404" in exc.message:
                src.disabled = exc.message
                src.notes.append(f"{exc.message}: not sampled")
            self._emit(
                ScrapeSample(
                    t_s=t_s,
                    t_wall=time.time(),
                    source=src.shown,
                    targets=src.targets,
                    ok=False,
                    error=exc.message,
                )
            )
            return
        sample = sample_of(snap, src, t_s)
        src.latest = sample
        src.waiting.add(sample.waiting)
        src.running.add(sample.running)
        src.kv_cache_usage.add(sample.kv_cache_usage)
        self._emit(sample)

    def _emit(self, sample: ScrapeSample) -> None:
        self.count += 1
        self.sink.put(sample)
        if self.on_sample is not None:
            self.on_sample(sample)

    async def run(self, stop: asyncio.Event) -> None:
        """Sample on a fixed grid (ticks a slow scrape overran are skipped) until ``stop``."""
        self.t0 = self.clock()
        tick = 0
        while not stop.is_set():
            await asyncio.gather(*(self._tick(s) for s in self.sources))
            tick = max(tick + 1, math.ceil((self.clock() - self.t0) / self.interval_s))
            if not await sleep_until(self.t0 + tick * self.interval_s, stop, self.clock):
                return

    async def baseline(self, *, settle_s: float = 3.0) -> None:
        """Full snapshots before the measured requests, once warmups have settled."""
        for src, snap in zip(self.sources, await self._settled_all(settle_s), strict=True):
            src.first = snap

    async def final(self, *, settle_s: float = 3.0) -> None:
        """Full snapshots after the last request, once the servers have settled."""
        for src, snap in zip(self.sources, await self._settled_all(settle_s), strict=True):
            src.last = snap

    async def _settled_all(self, settle_s: float) -> list[MetricsSnapshot | None]:
        return list(await asyncio.gather(*(self._settled(s, settle_s) for s in self.sources)))

    async def _settled(self, src: MetricsSource, settle_s: float) -> MetricsSnapshot | None:
        """Scrape in full until the server is idle and its finished-request count stops
        moving (vLLM publishes a request's histograms ~0.1-1 s after its last byte)."""
        if src.disabled is not None:
            return None
        deadline = self.clock() + settle_s
        previous: float | None = None
        while True:
            try:
                snap = await ascrape_metrics(src.url, client=self.client, headers=src.headers)
            except MetricsError as exc:
                src.notes.append(f"full scrape failed: {exc.message}")
                return None
            finished = _finished(snap)
            if self.clock() >= deadline or (not _busy(snap) and finished == previous):
                return snap
            previous = finished
            await asyncio.sleep(0.2)


def _finished(snap: MetricsSnapshot) -> float | None:
    return Reader(snap, detect_engine(snap), {}).hist("e2e")[1]


def _busy(snap: MetricsSnapshot) -> bool:
    rd = Reader(snap, detect_engine(snap), {})
    return bool(rd.gauge("running")) or bool(rd.gauge("waiting"))


def window(src: MetricsSource) -> MetricsDelta | None:
    """``last - first`` of the source's full snapshots: the run's server-side story.

    >>> window(MetricsSource("http://h/metrics", ["direct"], {})) is None
    True
    """
    if src.first is None or src.last is None:
        return None
    return metrics_delta(src.first, src.last)
