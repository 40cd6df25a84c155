"""The parts of a TTFT, per request and as medians; series and context-size buckets.

Per request the parts add up to the client's TTFT exactly (two of them are remainders, see
``ttftscope.decompose``): client tokenization, outside the server (serialization, network, HTTP,
JSON), the server's front end (chat rendering, tokenization, IPC), queue, prefill. A share
is a part's median over the median TTFT of the same requests, as the probe's table shows
them; shares of medians need not add up to 100%.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ttftscope.records import RequestRecord
from ttftscope.results.runs import Run, RunKind
from ttftscope.results.summaries import BenchSummary
from ttftscope.stats import median

Stat = Literal["median", "mean"]
Part = Literal["client_tokenize", "outside_server", "server_frontend", "queue", "prefill"]
# from the client inwards: the order of the stacked bars
PARTS: tuple[Part, ...] = (
    "client_tokenize",
    "outside_server",
    "server_frontend",
    "queue",
    "prefill",
)
PART_LABELS: dict[Part, str] = {
    "client_tokenize": "client tokenization",
    "outside_server": "outside the server",
    "server_frontend": "server front end",
    "queue": "queue",
    "prefill": "prefill",
}
# a probe sweeps a few sizes on purpose; more distinct sizes than this are a workload's draw
_MAX_EXACT_SIZES = 6
_VARIANT_ORDER = ("chat", "direct", "gateway", "text", "ids")


def part_ms(record: RequestRecord, part: Part) -> float | None:
    """One request's part in ms (outside the server includes the client's serialization).

    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   outside_server_ms=5.0, serialize_ms=0.5, queue_ms=2.0)
    >>> part_ms(r, "outside_server"), part_ms(r, "queue"), part_ms(r, "prefill")
    (5.5, 2.0, None)
    """
    if part == "client_tokenize":
        return record.tokenize_ms
    if part == "outside_server":
        out = record.outside_server_ms
        return None if out is None else out + (record.serialize_ms or 0.0)
    if part == "server_frontend":
        return record.server_frontend_ms
    if part == "queue":
        return record.queue_ms
    return record.prefill_ms


def latency_samples(records: Iterable[RequestRecord], kind: RunKind) -> list[RequestRecord]:
    """The requests latency statistics are made of.

    A probe's are its own (warm, successful, not shared with another client), so the
    report's medians equal the probe's table. Bench requests overlap by design: every
    successful request after the warm-ups counts, failures (429s) never do.

    >>> recs = [RequestRecord(run_id="r", index=i, variant="chat", phase=p, ok=True)
    ...         for i, p in enumerate(("warmup", "cold", "warm"))]
    >>> len(latency_samples(recs, "probe")), len(latency_samples(recs, "bench"))
    (1, 2)
    """
    if kind == "probe":
        return [r for r in records if r.ok and r.phase == "warm" and not r.contaminated]
    return [r for r in records if r.ok and r.phase != "warmup"]


def series_name(record: RequestRecord) -> str:
    """What a request is compared by: its bench target, else its variant.

    >>> series_name(RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True))
    'chat'
    """
    return record.target or record.variant


@dataclass(frozen=True)
class Series:
    """The latency samples of one target or variant of one run."""

    run: Run
    name: str
    records: tuple[RequestRecord, ...]

    @property
    def label(self) -> str:
        """``run · name``: unique across the runs of a report."""
        return f"{self.run.label} · {self.name}"


def split_series(run: Run) -> list[Series]:
    """One series per target or variant: a probe's chat paths first, then its A/B variants.

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> recs = tuple(RequestRecord(run_id="r", index=i, variant=v, phase="warm", ok=True)
    ...              for i, v in enumerate(("ids", "text", "chat")))
    >>> part = RunPart(kind="probe", key="r", label="p", source=Path("d"), records=recs)
    >>> [s.name for s in split_series(Run(kind="probe", key="r", label="p", parts=(part,)))]
    ['chat', 'text', 'ids']
    """
    samples = latency_samples(run.records, run.kind)
    names: list[str] = []
    for r in samples:
        if series_name(r) not in names:
            names.append(series_name(r))
    if run.kind == "probe":  # a bench's targets keep the order they were given in
        rank = {v: i for i, v in enumerate(_VARIANT_ORDER)}
        names.sort(key=lambda n: rank.get(n, len(rank)))
    return [Series(run, n, tuple(r for r in samples if series_name(r) == n)) for n in names]


@dataclass(frozen=True)
class Breakdown:
    """Where a TTFT goes: the parts' statistic against the same statistic of TTFT.

    >>> b = Breakdown(n=3, ttft_ms=100.0, parts=(("queue", 40.0), ("prefill", 50.0)))
    >>> b.share("queue"), b.dominant()
    (0.4, ('prefill', 0.5))
    """

    n: int
    ttft_ms: float
    parts: tuple[tuple[Part, float], ...]
    stat: Stat = "median"
    source: Literal["records", "histograms"] = "records"

    def part(self, part: Part) -> float | None:
        """The part's statistic in ms, if measured."""
        return dict(self.parts).get(part)

    def share(self, part: Part) -> float | None:
        """The part as a share of TTFT, if measured."""
        value = self.part(part)
        return None if value is None or self.ttft_ms <= 0 else value / self.ttft_ms

    def dominant(self) -> tuple[Part, float] | None:
        """The largest part and its share."""
        shares = [(p, self.share(p) or 0.0) for p, _ in self.parts]
        return max(shares, key=lambda s: s[1]) if shares else None


def records_breakdown(records: Sequence[RequestRecord]) -> Breakdown | None:
    """Medians of TTFT and of each part over the requests the server measured.

    ``None`` when no request has the server's view (bench under concurrency cannot tell
    which histogram observation is whose; its summary has run-wide aggregates instead).

    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   client_ttft_ms=100.0, server_ttft_ms=90.0, queue_ms=0.0,
    ...                   prefill_ms=30.0, server_frontend_ms=60.0, outside_server_ms=10.0)
    >>> records_breakdown([r]).share("server_frontend")
    0.6
    """
    seen = [r for r in records if r.client_ttft_ms is not None and r.server_ttft_ms is not None]
    ttft = median(r.client_ttft_ms for r in seen)
    if ttft is None:
        return None
    parts: list[tuple[Part, float]] = []
    for part in PARTS:
        values = [part_ms(r, part) for r in seen]
        if part == "client_tokenize" and any(v is not None for v in values):
            values = [v or 0.0 for v in values]  # a request that needed no tokenizing took 0
        value = median(values)
        if value is not None:
            parts.append((part, max(value, 0.0)))  # remainders can dip below 0 by clock noise
    return Breakdown(n=len(seen), ttft_ms=ttft, parts=tuple(parts))


def summary_breakdown(summaries: Sequence[BenchSummary]) -> Breakdown | None:
    """The run-wide breakdown from bench summaries' server histograms (means of the run).

    Outside the server is the client's mean TTFT less the server's (client work included).
    Shards are weighted by their completed requests.

    >>> s = BenchSummary(completed=4, mean_ttft_ms=200.0, server_mean_ttft_ms=180.0,
    ...                  server_mean_queue_ms=80.0, server_mean_prefill_ms=60.0)
    >>> b = summary_breakdown([s]); b.stat, b.share("queue"), b.part("outside_server")
    ('mean', 0.4, 20.0)
    """
    ttft = _weighted(summaries, lambda s: s.mean_ttft_ms)
    if ttft is None:
        return None
    server = _weighted(summaries, lambda s: s.server_mean_ttft_ms)
    found: dict[Part, float | None] = {
        "outside_server": None if server is None else max(ttft - server, 0.0),
        "server_frontend": _weighted(summaries, lambda s: s.server_mean_frontend_ms),
        "queue": _weighted(summaries, lambda s: s.server_mean_queue_ms),
        "prefill": _weighted(summaries, lambda s: s.server_mean_prefill_ms),
    }
    parts = tuple((p, v) for p in PARTS if (v := found.get(p)) is not None)
    if not parts:
        return None
    n = sum(s.completed or 0 for s in summaries)
    return Breakdown(n=n, ttft_ms=ttft, parts=parts, stat="mean", source="histograms")


def _weighted(
    summaries: Sequence[BenchSummary], value: Callable[[BenchSummary], float | None]
) -> float | None:
    pairs = [(value(s), max(s.completed or 1, 1)) for s in summaries]
    known = [(v, w) for v, w in pairs if v is not None and math.isfinite(v)]
    if not known or len(known) < len(pairs):  # a shard without the figure: no average
        return None
    return sum(v * w for v, w in known) / sum(w for _, w in known)


def hit_rate(records: Iterable[RequestRecord]) -> float | None:
    """Prefix-cache hit rate over the requests: their hits over their queries (tokens).

    >>> r = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
    ...                   prefix_hits=90.0, prefix_queries=100.0)
    >>> hit_rate([r, r])
    0.9
    """
    hits = queries = 0.0
    for r in records:
        if r.prefix_hits is not None and r.prefix_queries:
            hits += r.prefix_hits
            queries += r.prefix_queries
    return hits / queries if queries else None


@dataclass(frozen=True)
class Buckets:
    """Context sizes grouped for the bars: each probed size, or powers of two for a workload.

    >>> Buckets(exact=True).label(8000), Buckets(exact=False).label(65536)
    ('8,000 tokens', '64K–128K tokens')
    """

    exact: bool

    @classmethod
    def for_records(cls, records: Iterable[RequestRecord], kind: RunKind = "probe") -> Buckets:
        """A probe's few swept sizes exactly; a bench's drawn sizes (or many) in bins."""
        sizes = {r.context_tokens_target for r in records}
        return cls(exact=kind == "probe" and len(sizes) <= _MAX_EXACT_SIZES)

    def key(self, record: RequestRecord) -> int:
        """The bucket's lower bound in tokens."""
        if self.exact:
            return record.context_tokens_target
        size = max(record.context_tokens_target, record.prompt_tokens or 0, 1)
        return 1 << int(math.log2(size))

    def label(self, key: int) -> str:
        """How the bucket is written on the axis."""
        if self.exact:
            return f"{key:,} tokens"
        return f"{_kilo(key)}–{_kilo(key * 2)} tokens"


def _kilo(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 else str(n)


def largest_bucket(records: Sequence[RequestRecord]) -> tuple[str, list[RequestRecord]]:
    """The largest context size's label and requests (a probe is judged at it).

    >>> r = [RequestRecord(run_id="r", index=i, variant="chat", phase="warm", ok=True,
    ...                    context_tokens_target=s) for i, s in enumerate((0, 8000, 8000))]
    >>> label, mine = largest_bucket(r); label, len(mine)
    ('8,000 tokens', 2)
    """
    if not records:
        return "", []
    buckets = Buckets.for_records(records)
    top = max(buckets.key(r) for r in records)
    return buckets.label(top), [r for r in records if buckets.key(r) == top]


def series_scope(series: Series) -> tuple[str, list[RequestRecord]]:
    """What a judgement of ``series`` is about: a probe's largest context size, a bench's all.

    Returns the words that say so (``" at 8,000 tokens"``, empty for a bench) and those
    requests.

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> recs = tuple(RequestRecord(run_id="r", index=i, variant="chat", phase="warm", ok=True,
    ...                          context_tokens_target=s) for i, s in enumerate((0, 8000)))
    >>> part = RunPart(kind="probe", key="r", label="p", source=Path("d"), records=recs)
    >>> (s,) = split_series(Run(kind="probe", key="r", label="p", parts=(part,)))
    >>> where, mine = series_scope(s); where, len(mine)
    (' at 8,000 tokens', 1)
    """
    if series.run.kind == "probe":
        label, records = largest_bucket(list(series.records))
        return f" at {label}", records
    return "", list(series.records)
