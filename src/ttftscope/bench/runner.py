"""A whole bench run: prepare the workload, warm up, measure while sampling, summarize.

Files in the result directory (a shard's names end in ``.shard-I-of-N``):

- ``bench-records.jsonl``: one :class:`~ttftscope.records.RequestRecord` per request,
  warmups and failures included, flushed as each finishes;
- ``samples.jsonl``: one :class:`~ttftscope.bench.observe.sampler.ScrapeSample` per scrape;
- ``bench-summary.json``: :func:`~ttftscope.bench.output.bench_summary.summarize_bench`, written at
  the end, also when the run was stopped by a failure or interrupted.

Every shard of one workload records the same run id (derived from the workload unless
``--run-id`` is given), seed and workload key, so their directories merge.

>>> # asyncio.run(run_bench(Endpoint.from_settings(s), BenchOptions(), result_dir=Path("r")))
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from ttftscope.bench.hooks import Hooks
from ttftscope.bench.observe.sampler import Sampler, sources_of
from ttftscope.bench.observe.servers import server_parts
from ttftscope.bench.observe.spans import SpanJoiner
from ttftscope.bench.options import BenchOptions, Shard, unique_targets
from ttftscope.bench.output.bench_summary import RunFacts, summarize_bench
from ttftscope.bench.output.sink import JsonlSink
from ttftscope.bench.plan.conversations import warmup_body
from ttftscope.bench.plan.preparation import Prepared, prepare
from ttftscope.bench.plan.workload import TurnPlan
from ttftscope.bench.send.drive import FATAL, Abort, DriveConfig, Driver
from ttftscope.bench.send.pacing import Pacer, Slots
from ttftscope.bench.send.request import Attempt, Sent, request_client, send
from ttftscope.bench.send.transport import StreamClient
from ttftscope.bench.targets import Target, resolve_targets
from ttftscope.client.endpoint import Endpoint
from ttftscope.errors import ConfigError, FailureKind, error_for
from ttftscope.metrics.scrape import safe_url
from ttftscope.records import RequestRecord
from ttftscope.tracing.emit import SpanEmitter
from ttftscope.tracing.names import CLIENT_SERVICE
from ttftscope.tracing.receiver import receiving
from ttftscope.tracing.spans import client_span

SETTLE_S = 3.0


@dataclass(frozen=True)
class ResultFiles:
    """The three files of one run (or shard) in its result directory.

    >>> ResultFiles.in_dir(Path("r"), Shard(2, 3)).summary.name
    'bench-summary.shard-2-of-3.json'
    """

    records: Path
    samples: Path
    summary: Path

    @classmethod
    def in_dir(cls, directory: Path, shard: Shard) -> ResultFiles:
        """The file names of ``shard`` in ``directory``."""
        tail = "" if shard.count == 1 else f".shard-{shard.index}-of-{shard.count}"
        return cls(
            directory / f"bench-records{tail}.jsonl",
            directory / f"samples{tail}.jsonl",
            directory / f"bench-summary{tail}.json",
        )


@dataclass(repr=False)
class BenchRun:
    """What a run did: every record, the summary, and the failure that stopped it, if any.

    >>> BenchRun("bench-k", "m", ResultFiles.in_dir(Path("r"), Shard()))
    BenchRun(run_id='bench-k', records=0, aborted=False)
    """

    run_id: str
    model: str
    files: ResultFiles
    records: list[RequestRecord] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    abort: Abort | None = None

    def __repr__(self) -> str:
        # short: asyncio shows a finished task's result, and a run can hold 100K records
        return f"BenchRun(run_id={self.run_id!r}, records={len(self.records)}, " + (
            f"aborted={self.abort is not None})"
        )

    def raise_for_abort(self) -> None:
        """Raise the error (and so exit code) of the failure that stopped the run, if any."""
        if self.abort is None:
            return
        res = self.abort.result
        done = sum(r.ok for r in self.records)
        raise error_for(
            res.error_kind or FailureKind.REQUEST_ERROR,
            f"bench stopped: target {self.abort.target!r} ({safe_url(self.abort.base_url)}) "
            f"failed: {res.error}. {done} requests had completed; every finished request "
            f"is in {self.files.records} and the summary of them in {self.files.summary}",
            hint=res.error_hint or "check the server and its log, then run again",
            status=res.status,
            retry_after=res.retry_after,
        )


class _Bench:
    """The state of one run while it goes."""

    def __init__(self, ep: Endpoint, opts: BenchOptions, files: ResultFiles, hooks: Hooks):
        self.ep, self.opts, self.files, self.hooks = ep, opts, files, hooks
        self.targets: tuple[Target, ...] = resolve_targets(ep, unique_targets(opts.targets))
        self.records: list[RequestRecord] = []
        self.itl: defaultdict[str, list[float]] = defaultdict(list)
        self.sink: JsonlSink | None = None
        self.abort: Abort | None = None
        self.duration_s = 0.0
        self.cancelled = 0
        self.peak_in_flight = 0
        self.interrupted = False
        self.sampler: Sampler | None = None
        self.emitter: SpanEmitter | None = None
        self.spans: SpanJoiner | None = None

    def emit(self, sent: Sent) -> None:
        rec = sent.record
        if self.emitter is not None and sent.trace is not None:
            self.emitter.emit(CLIENT_SERVICE, [client_span(rec, sent.trace)])
        if rec.phase != "warmup":
            self.itl[rec.target or ""].extend(sent.itl_ms)
        self.records.append(rec)
        if self.spans is not None:
            span_id = None if sent.trace is None else sent.trace.span_id
            self.spans.later(rec, self._write, span_id)  # written once its spans are joined
        else:
            self._write(rec)
        if self.hooks.on_record is not None:
            self.hooks.on_record(rec)

    def _write(self, rec: RequestRecord) -> None:
        if self.sink is not None:
            self.sink.put(rec)

    async def warmups(self, client: StreamClient, prep: Prepared) -> None:
        w, n = self.opts.num_warmups, len(self.targets)
        for k in range(w):
            for i, target in enumerate(self.targets):
                self.hooks.warmup(k * n + i, w * n)
                index = -(1 + (self.opts.shard.index - 1) * w * n + k * n + i)
                turn = TurnPlan(-1, k, index, 0, 0.0, i)
                shard = str(self.opts.shard)
                who = Attempt(prep.run_id, shard, target, turn, "warmup", 0, api=prep.api)
                body = warmup_body(prep.defaults, self.opts.seed, k)
                sent = await send(client, who, body, timeout_s=self.ep.timeout_s)
                sent.record.session = sent.record.turn = None
                self.emit(sent)
                if sent.result.error_kind in FATAL:
                    self.abort = Abort(target.name, target.base_url, sent.result)
                    return
        if w:
            self.hooks.warmup(w * n, w * n)

    async def measure(self, metrics: httpx.AsyncClient, prep: Prepared) -> None:
        with JsonlSink(self.files.samples) as samples:
            self.sampler = sampler = Sampler(
                sources_of(self.targets),
                metrics,
                samples,
                interval_s=self.opts.sample_interval_s,
                on_sample=self.hooks.on_sample,
            )
            self.hooks.stage("reading each server's /metrics before the run")
            await sampler.baseline(settle_s=SETTLE_S)
            await self._drive(prep, sampler)
            self.hooks.stage("letting the servers' metrics settle")
            await sampler.final(settle_s=SETTLE_S)

    async def _drive(self, prep: Prepared, sampler: Sampler) -> None:
        stop_sampling = asyncio.Event()
        sampling = asyncio.create_task(sampler.run(stop_sampling))
        start = time.monotonic()
        cfg = DriveConfig(
            run_id=prep.run_id,
            shard=str(self.opts.shard),
            defaults=prep.defaults,
            timeout_s=self.ep.timeout_s,
            workers=self.opts.sessions,
            deadline=start + self.opts.duration_s,
            drain_s=self.opts.drain_s,
            honour_retry_after=self.opts.honour_retry_after,
        )
        slots = Slots(self.opts.shard_concurrency)
        n_targets = len(self.targets)
        driver = Driver(
            lambda: request_client(n_targets),
            self.targets,
            cfg,
            pacer=Pacer(self.opts.shard_rate, self.opts.seed),
            slots=slots,
            emit=self.emit,
            waiting=sampler.waiting,
        )
        n = sum(len(c.plan.turns) for c in prep.conversations)
        self.hooks.stage(f"{n} requests in {len(prep.conversations)} sessions")
        if self.hooks.on_start is not None:
            self.hooks.on_start(n)
        try:
            await driver.run(prep.conversations)
        finally:
            self.duration_s = time.monotonic() - start
            self.abort = self.abort or driver.abort
            self.cancelled, self.peak_in_flight = driver.cancelled, slots.peak
            stop_sampling.set()
            await sampling

    def summary(self, prep: Prepared, header: dict[str, Any]) -> dict[str, Any]:
        sampler = self.sampler
        parts = [
            server_parts(src, model=prep.model, percentiles=self.opts.percentiles)
            for src in (sampler.sources if sampler is not None else [])
        ]
        header = {
            **header,
            "samples": 0 if sampler is None else sampler.count,
            "cancelled": self.cancelled,
            "max_concurrent_requests": self.peak_in_flight,
            "aborted": None if self.abort is None else self.abort.result.error,
            "interrupted": self.interrupted,
        }
        facts = RunFacts(
            header,
            self.records,
            self.itl,
            [t.name for t in self.targets],
            parts,
            self.duration_s,
            self.opts.percentiles,
        )
        return summarize_bench(facts)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


def header_of(
    opts: BenchOptions, prep: Prepared, targets: Sequence[Target], files: ResultFiles
) -> dict[str, Any]:
    """The summary's identity and options part (what makes shards mergeable).

    >>> from ttftscope.bench.plan.bodies import BodyDefaults
    >>> prep = Prepared("bench-k", "k", 0, "m", BodyDefaults("m", 4, 0.0), [])
    >>> header_of(BenchOptions(), prep, [], ResultFiles.in_dir(Path("r"), Shard()))["shard"]
    '1/1'
    """
    return {
        "kind": "bench",
        "run_id": prep.run_id,
        "label": opts.label,
        "seed": opts.seed,
        "shard": str(opts.shard),
        "shard_index": opts.shard.index,
        "shard_count": opts.shard.count,
        "workload": "replay" if opts.replay is not None else "synthetic",
        "api": prep.api,
        "max_tokens": prep.defaults.max_tokens,
        "workload_key": prep.workload_key,
        "workload_requests": prep.workload_requests,
        "num_prompts": sum(len(c.plan.turns) for c in prep.conversations),
        "sessions": len(prep.conversations),
        "model": prep.model,
        "target_urls": {t.name: safe_url(t.base_url) for t in targets},
        "context_tokens": None if opts.replay else str(opts.context_tokens.scaled(opts.scale)),
        "scale": opts.scale,
        "shared_system_prompt": opts.shared_system_prompt,
        "think_time_s": opts.think_time_s,
        "max_concurrency": opts.max_concurrency,
        "request_rate": "inf" if math.isinf(opts.request_rate) else opts.request_rate,
        "burstiness": 1.0,
        "honour_retry_after": opts.honour_retry_after,
        "percentiles": list(opts.percentiles),
        "started_at": time.time(),
        "records_path": str(files.records),
        "samples_path": str(files.samples),
    }


async def run_bench(
    ep: Endpoint,
    opts: BenchOptions,
    *,
    result_dir: Path,
    count_tokens: Callable[[str], int] | None = None,
    hooks: Hooks | None = None,
    exclude: set[str] | None = None,
    emitter: SpanEmitter | None = None,
) -> BenchRun:
    """Run one bench (one shard of it) and write its files; see the module docstring.

    ``count_tokens`` counts context tokens locally (a tokenizer); without it the server's
    ``/tokenize`` does. ``exclude`` names record fields not to write. A failure every later
    request would repeat stops the run: the result's :meth:`BenchRun.raise_for_abort`
    raises it (after the summary is written). Every request carries ``traceparent`` and
    ``X-Request-Id`` (its record's ``trace_id``); with an ``emitter`` each is a client span.

    >>> import asyncio
    >>> from ttftscope import BenchOptions, Endpoint, run_bench
    >>> ep = Endpoint(base_url=server_url, metrics_url=metrics_url, model="tiny-llama")
    >>> opts = BenchOptions(sessions=2, num_prompts=4, scale=0.01, think_time_s=0, num_warmups=0)
    >>> run = asyncio.run(run_bench(ep, opts, result_dir=result_dir,
    ...                             count_tokens=lambda text: len(text) // 4))
    >>> run.summary["completed"], run.summary["failed"], run.summary["p99_ttft_ms"] > 0
    (4, 0, True)
    >>> sorted(path.name for path in result_dir.iterdir())
    ['bench-records.jsonl', 'bench-summary.json', 'samples.jsonl']
    """
    hooks = hooks or Hooks()
    files = ResultFiles.in_dir(result_dir, opts.shard)
    if files.records.exists() and files.records.stat().st_size > 0:
        # appending would mix two runs in one file, and the summary would describe one
        raise ConfigError(
            f"{result_dir} already holds a bench run ({files.records.name})",
            hint="pick another --result-dir (each run or shard writes its own files)",
        )
    bench = _Bench(ep, opts, files, hooks)
    bench.emitter = emitter
    with receiving(opts.trace_port) as store:
        if store is not None:
            bench.spans = SpanJoiner(store, opts.span_wait_s)
        run = await _run(bench, ep, opts, files, count_tokens, exclude)
    run.abort = bench.abort
    return run


async def _run(
    bench: _Bench,
    ep: Endpoint,
    opts: BenchOptions,
    files: ResultFiles,
    count_tokens: Callable[[str], int] | None,
    exclude: set[str] | None,
) -> BenchRun:
    hooks = bench.hooks
    async with (
        httpx.AsyncClient(timeout=ep.timeout_s) as http,
        request_client(len(bench.targets)) as client,
        httpx.AsyncClient(timeout=5.0) as metrics,
    ):
        prep = await prepare(ep, opts, bench.targets, http, count_tokens, hooks.stage)
        opts = replace(opts, scale=prep.scale)  # as sent, and so in the summary
        for note in prep.notes:
            hooks.note(note)
        run = BenchRun(prep.run_id, prep.model, files, bench.records)
        header = header_of(opts, prep, bench.targets, files)
        bench.sink = JsonlSink(files.records, exclude=exclude)
        try:
            await bench.warmups(client, prep)
            if bench.abort is None:
                await bench.measure(metrics, prep)
        except asyncio.CancelledError:  # Ctrl-C: what finished is kept and summarized
            bench.interrupted = True
            raise
        finally:
            if bench.spans is not None and len(bench.spans):
                hooks.stage(f"waiting for vLLM's spans of {len(bench.spans)} requests")
                await bench.spans.drain()
            bench.sink.close()
            run.summary = bench.summary(prep, header)
            _write_json(files.summary, run.summary)
    return run
