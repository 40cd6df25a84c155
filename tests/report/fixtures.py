"""Result directories for the report's tests, written the way probe and bench write them.

Probe directories come from synthetic records run through the probe's real summary code
and :class:`~ttftscope.records.RecordWriter`; bench directories follow bench's layout
(request records in the shared schema with target, session, turn and shard; samples.jsonl
from the sampler; bench-summary.json with ``vllm bench serve``'s flat keys).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ttftscope.errors import FailureKind
from ttftscope.probe.summary import summarize_probe
from ttftscope.records import Phase, RecordWriter, RequestRecord, Variant

T0 = 1_790_000_000.0  # wall-clock start of every synthetic run


@dataclass(frozen=True)
class Parts:
    """One request's parts in ms; client TTFT is their sum, as decompose makes it."""

    frontend: float = 20.0
    queue: float = 0.0
    prefill: float = 30.0
    outside: float = 10.0
    serialize: float = 0.0
    tokenize: float | None = None
    hit_rate: float = 0.9


def record(
    index: int,
    parts: Parts = Parts(),
    *,
    run_id: str = "run-a",
    variant: Variant = "chat",
    phase: Phase = "warm",
    size: int = 8000,
    t: float = 0.0,
    **bench: object,
) -> RequestRecord:
    """A successful request whose parts are exactly ``parts``."""
    server = parts.frontend + parts.queue + parts.prefill
    wire = server + parts.outside
    queries = 1000.0
    return RequestRecord.model_validate(
        {
            "run_id": run_id,
            "index": index,
            "variant": variant,
            "phase": phase,
            "context_tokens_target": size,
            "ok": True,
            "status": 200,
            "model": "tiny",
            "prompt_tokens": size + 500,
            "wire_ttft_ms": wire,
            "client_ttft_ms": wire + parts.serialize + (parts.tokenize or 0.0),
            "serialize_ms": parts.serialize,
            "tokenize_ms": parts.tokenize,
            "server_ttft_ms": server,
            "queue_ms": parts.queue,
            "prefill_ms": parts.prefill,
            "server_frontend_ms": parts.frontend,
            "outside_server_ms": parts.outside,
            "prefix_queries": queries,
            "prefix_hits": queries * parts.hit_rate,
            "prefix_hit_rate": parts.hit_rate,
            "waiting_before": 0.0,
            "t_wall": T0 + t,
            **bench,
        }
    )


def failed(index: int, kind: FailureKind = FailureKind.RATE_LIMITED, **kw: object) -> RequestRecord:
    """A failed request (429 by default), as the probe and bench record it."""
    base: dict[str, object] = {"run_id": "run-a", "variant": "chat", "phase": "warm"}
    base.update(kw)
    return RequestRecord.model_validate(
        {**base, "index": index, "ok": False, "status": 429, "error_kind": kind, "error": "429"}
    )


def probe_records(
    sizes: Sequence[int] = (0, 8000),
    variants: Sequence[Variant] = ("chat", "text", "ids"),
    repeat: int = 3,
    run_id: str = "run-a",
) -> list[RequestRecord]:
    """A probe sweep: per size and variant a cold request, then ``repeat`` warm ones.

    Front end grows with context (re-tokenizing it) except when ids are sent; warm requests
    vary a little so medians are not all equal.
    """
    out: list[RequestRecord] = []
    for size in sizes:
        for variant in variants:
            frontend = 2.0 if variant == "ids" else 3.0 + size / 200
            cold = Parts(frontend=frontend, prefill=30.0 + size / 100, hit_rate=0.0)
            out.append(
                record(
                    len(out),
                    cold,
                    run_id=run_id,
                    variant=variant,
                    phase="cold",
                    size=size,
                    t=len(out) * 0.2,
                )
            )
            for k in range(repeat):
                warm = Parts(
                    frontend=frontend + k,
                    prefill=20.0 + k,
                    outside=8.0 + k,
                    serialize=0.1,
                    hit_rate=0.95,
                )
                out.append(
                    record(
                        len(out), warm, run_id=run_id, variant=variant, size=size, t=len(out) * 0.2
                    )
                )
    return out


def write_probe_dir(
    directory: Path, records: Sequence[RequestRecord], stamp: str = "20260101-000000"
) -> Path:
    """``probe-<stamp>.jsonl`` and its ``.summary.json``, as ``ttftscope probe`` writes them."""
    path = directory / f"probe-{stamp}.jsonl"
    with RecordWriter(path) as writer:
        for r in records:
            writer.write(r)
    summary = summarize_probe(records, model="tiny", base_url="http://127.0.0.1:8000/v1")
    summary["run_id"] = records[0].run_id if records else ""
    summary["records_path"] = str(path)
    path.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2))
    return path


@dataclass
class BenchDir:
    """A bench result directory's contents; :meth:`write` lays it out."""

    records: list[RequestRecord] = field(default_factory=list)
    samples: list[dict[str, object]] = field(default_factory=list)
    summary: dict[str, object] | None = None
    records_name: str = "bench-records"
    tail: str = ""  # ".shard-I-of-N": bench's names when shards share a directory

    def write(self, directory: Path) -> Path:
        """Write the records, samples.jsonl and bench-summary.json that were given."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.records:
            with RecordWriter(directory / f"{self.records_name}{self.tail}.jsonl") as writer:
                for r in self.records:
                    writer.write(r)
        if self.samples:
            lines = "".join(json.dumps(s) + "\n" for s in self.samples)
            (directory / f"samples{self.tail}.jsonl").write_text(lines)
        if self.summary is not None:
            summary = json.dumps(self.summary)
            (directory / f"bench-summary{self.tail}.json").write_text(summary)
        return directory


def bench_records(
    n: int,
    parts: Parts,
    *,
    run_id: str = "bench-1",
    targets: Sequence[str] = ("direct",),
    shard: str | None = None,
    sessions: int = 4,
    start: int = 0,
) -> list[RequestRecord]:
    """``n`` requests per target, dealt to sessions; workload indexes start at ``start``."""
    out = []
    for i in range(start, start + n):
        for target in targets:
            varied = dataclasses.replace(parts, prefill=parts.prefill + i % 5)
            out.append(
                record(
                    i,
                    varied,
                    run_id=run_id,
                    variant="chat",
                    size=6000 + 500 * (i % 4),
                    t=i * 0.3,
                    target=target,
                    session=i % sessions,
                    turn=i // sessions,
                    shard=shard,
                )
            )
    return out


def queue_samples(
    count: int, *, waiting_peak: int = 6, targets: Sequence[str] = ("direct",)
) -> list[dict[str, object]]:
    """The sampler's lines, one server per target: a queue that rises and falls, counters
    that only grow."""
    out: list[dict[str, object]] = []
    for port, target in enumerate(targets, start=8000):
        for k in range(count):
            waiting = max(0, waiting_peak - abs(k - count // 2))
            out.append(
                {
                    "schema_version": 1,
                    "t_s": k * 0.25,
                    "t_wall": T0 + k * 0.25,
                    "source": f"http://127.0.0.1:{port}/metrics",
                    "targets": [target],
                    "ok": True,
                    "engine": "vllm",
                    "running": 4,
                    "waiting": waiting,
                    "kv_cache_usage": 0.5,
                    "prefix_hits": 900.0 * k,
                    "prefix_queries": 1000.0 * k,
                    "gateway": {},
                }
            )
    return out


def write_mixed_dirs(root: Path) -> list[Path]:
    """A probe sweep, a bench run in two shards (direct and gateway) and a second bench run.

    Three runs once merged, every plot with data; the label carries markup to be escaped.
    """
    probe = root / "probe"
    write_probe_dir(probe, probe_records())
    whole = bench_records(24, Parts(queue=30.0, frontend=60.0), targets=("direct", "gateway"))
    dirs = [probe]
    for index in (1, 2):
        mine = [
            r.model_copy(update={"shard": f"{index}/2"})
            for r in whole
            if r.session is not None and r.session % 2 == index - 1
        ]
        dirs.append(
            BenchDir(
                records=mine,
                samples=queue_samples(12, targets=("direct", "gateway")),
                summary={"run_id": "bench-1", "label": "<b>agents</b>", "shard": f"{index}/2"},
            ).write(root / f"shard{index}")
        )
    other = bench_records(10, Parts(prefill=90.0), run_id="bench-2")
    dirs.append(BenchDir(records=other, summary={"run_id": "bench-2"}).write(root / "rerun"))
    return dirs
