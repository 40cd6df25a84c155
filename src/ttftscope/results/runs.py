"""Result directories as runs: what probe and bench wrote, shards of one run merged.

A probe directory holds ``probe-<time>.jsonl`` (one record per request) and its
``.summary.json``; every probe file is a run of its own. A bench directory holds request
records (``bench-records.jsonl``, or any other ``.jsonl``), ``samples.jsonl`` (the
``/metrics`` sampler) and ``bench-summary.json``: one run, or one shard of one
(``--shard I/N``), whose files end in ``.shard-I-of-N`` so that shards can share a
directory.
Shards of one run (the same run id, or without one the same seed, and the same shard count)
are merged into one :class:`Run`; other runs stay apart and are shown side by side. A
directory's subfolders are read too (``bench --result-dir results/run1`` beside a probe in
``results/``), each folder once however often it is reached.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ttftscope.errors import ConfigError
from ttftscope.records import RequestRecord, read_records_report
from ttftscope.results.files import Sample, read_jsonl, read_summary
from ttftscope.results.folders import result_folders
from ttftscope.results.summaries import BenchSummary, ProbeSummaryHead, shard_position

RunKind = Literal["probe", "bench"]
BENCH_SUMMARY = "bench-summary.json"
_SHARD_TAIL = re.compile(r"\.shard-(\d+)-of-(\d+)$")
_HINT = (
    "pass directories that `ttftscope probe --result-dir` or `ttftscope bench --result-dir` "
    "wrote (probe-*.jsonl, bench-summary.json, samples.jsonl)"
)


class NoResults(ConfigError):
    """Nothing to report on: a path is missing, or holds no records and no summary.

    >>> NoResults("x").exit_code
    2
    """


@dataclass(frozen=True)
class RunPart:
    """What one probe file or one bench directory holds."""

    kind: RunKind
    key: str
    label: str
    source: Path
    records: tuple[RequestRecord, ...] = ()
    samples: tuple[Sample, ...] = ()
    bench: BenchSummary | None = None
    model: str | None = None
    shard: tuple[int, int] | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Run:
    """One run, possibly merged from shards: every record, sample and summary of it.

    >>> part = RunPart(kind="probe", key="r", label="probe r", source=Path("d"))
    >>> Run(kind="probe", key="r", label="probe r", parts=(part,)).sources
    (PosixPath('d'),)
    """

    kind: RunKind
    key: str
    label: str
    parts: tuple[RunPart, ...]
    notes: tuple[str, ...] = ()

    @property
    def records(self) -> tuple[RequestRecord, ...]:
        """Every request record of every part."""
        return tuple(r for p in self.parts for r in p.records)

    @property
    def samples(self) -> tuple[Sample, ...]:
        """Every ``/metrics`` sample of every part."""
        return tuple(s for p in self.parts for s in p.samples)

    @property
    def bench_summaries(self) -> tuple[BenchSummary, ...]:
        """The bench summaries of the parts that have one (one per shard)."""
        return tuple(p.bench for p in self.parts if p.bench is not None)

    @property
    def sources(self) -> tuple[Path, ...]:
        """The files or directories the run was read from."""
        return tuple(p.source for p in self.parts)

    @property
    def model(self) -> str | None:
        """The served model, from a summary or the records."""
        named = [p.model for p in self.parts if p.model]
        named += [r.model for r in self.records if r.model]
        return named[0] if named else None


def load_runs(paths: Sequence[Path]) -> list[Run]:
    """Read every result directory and merge shards of one run; in the order given.

    >>> load_runs([Path("/nonexistent")])
    Traceback (most recent call last):
    ...
    ttftscope.results.runs.NoResults: /nonexistent does not exist
      hint: pass directories that `ttftscope probe --result-dir` or ...
    """
    parts: list[RunPart] = []
    seen: set[tuple[Path, str]] = set()
    for path in paths:
        found = read_result_path(path)
        if not found:
            raise NoResults(f"{path} holds no probe or bench results", hint=_HINT)
        for part in found:  # a folder read twice (given, and inside another) counts once
            if (part.source.resolve(), part.key) not in seen:
                seen.add((part.source.resolve(), part.key))
                parts.append(part)
    return merge_parts(parts)


def read_result_path(path: Path) -> list[RunPart]:
    """The runs in one records file, or a directory and its subfolders (:mod:`.folders`:
    those with results left unread are named in the first part's notes); empty when none.

    >>> import tempfile; read_result_path(Path(tempfile.mkdtemp()))
    []
    """
    if path.is_file() and path.suffix == ".jsonl":
        return _probe_parts(path)
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise NoResults(f"{path} {what}", hint=_HINT)
    folders = result_folders(path)
    parts = [part for folder in folders.found for part in _folder_parts(folder)]
    if folders.skipped and not parts:
        raise NoResults(f"{path} holds no probe or bench results; {folders.skipped[0]}")
    if folders.skipped:
        parts[0] = dataclasses.replace(parts[0], notes=(*folders.skipped, *parts[0].notes))
    return parts


def _folder_parts(path: Path) -> list[RunPart]:
    """The runs in one folder's own files."""
    parts: list[RunPart] = []
    # instrument(client) writes the probe's record schema, one run per process
    for file in sorted([*path.glob("probe-*.jsonl"), *path.glob("instrument*.jsonl")]):
        parts.extend(_probe_parts(file))
    parts.extend(_bench_parts(path))
    return parts


def _skipped_note(path: Path, skipped: tuple[int, ...]) -> tuple[str, ...]:
    if not skipped:
        return ()
    shown = ", ".join(str(n) for n in skipped[:5]) + (", …" if len(skipped) > 5 else "")
    return (f"{path.name}: skipped {len(skipped)} line(s) that hold no record (lines {shown})",)


def _dropped_note(path: Path, dropped: tuple[str, ...]) -> tuple[str, ...]:
    if not dropped:
        return ()
    return (f"{path.name}: ignored {', '.join(dropped)} (values of an unexpected type)",)


def _probe_parts(file: Path) -> list[RunPart]:
    got = read_records_report(file)
    records, skipped = got.records, got.skipped_lines
    head, dropped = read_summary(file.with_suffix(".summary.json"), ProbeSummaryHead)
    notes = _skipped_note(file, skipped) + _dropped_note(file, dropped)
    if not records:
        return []
    by_run: dict[str, list[RequestRecord]] = {}
    for r in records:  # one probe file is one run; a concatenated file splits by run id
        by_run.setdefault(r.run_id, []).append(r)
    label = file.stem  # the directory is in the report's sources
    return [
        RunPart(
            kind="probe",
            key=f"probe:{run_id}",
            label=label if len(by_run) == 1 else f"{label} ({run_id})",
            source=file,
            records=tuple(mine),
            model=head.model if head else None,
            notes=notes,
        )
        for run_id, mine in by_run.items()
    ]


@dataclass
class _BenchFiles:
    """The files of one bench run or shard in a directory."""

    records: list[Path] = field(default_factory=list)
    samples: list[Path] = field(default_factory=list)
    summary: Path | None = None


def shard_tail(path: Path) -> tuple[str, tuple[int, int] | None]:
    """The ``.shard-I-of-N`` ending bench gives a shard's file names, and ``(I, N)``.

    >>> shard_tail(Path("bench-records.shard-2-of-3.jsonl")), shard_tail(Path("samples.jsonl"))
    (('.shard-2-of-3', (2, 3)), ('', None))
    """
    match = _SHARD_TAIL.search(path.stem)
    if match is None:
        return "", None
    return match[0], shard_position(f"{match[1]}/{match[2]}")


# probe and instrument records, and request logs (bodies, not records)
_NOT_BENCH = ("probe-", "instrument", "requests", "gateway-requests")


def _bench_files(directory: Path) -> dict[str, _BenchFiles]:
    """The bench files of a directory by shard ending (shards may share a directory)."""
    out: dict[str, _BenchFiles] = {}
    for file in sorted(directory.glob("*.jsonl")):
        if file.name.startswith(_NOT_BENCH):
            continue
        files = out.setdefault(shard_tail(file)[0], _BenchFiles())
        (files.samples if file.name.startswith("samples") else files.records).append(file)
    for file in sorted(directory.glob("bench-summary*.json")):
        out.setdefault(shard_tail(file)[0], _BenchFiles()).summary = file
    return out


def _bench_parts(directory: Path) -> list[RunPart]:
    return [
        part
        for tail, files in _bench_files(directory).items()
        if (part := _bench_part(directory, tail, files)) is not None
    ]


def _read_bench(files: _BenchFiles) -> tuple[list[RequestRecord], list[Sample], list[str]]:
    records: list[RequestRecord] = []
    notes: list[str] = []
    for file in files.records:
        got = read_records_report(file)
        records.extend(got.records)
        notes.extend(_skipped_note(file, got.skipped_lines))
    samples: list[Sample] = []
    for file in files.samples:
        got_samples, skipped = read_jsonl(file, Sample)
        samples.extend(got_samples)
        notes.extend(_skipped_note(file, skipped))
    return records, samples, notes


def _bench_part(directory: Path, tail: str, files: _BenchFiles) -> RunPart | None:
    summary_path = files.summary or directory / f"bench-summary{tail}.json"
    summary, dropped = read_summary(summary_path, BenchSummary)
    records, samples, notes = _read_bench(files)
    if summary is None and not records and not samples:
        return None
    notes[:0] = _dropped_note(summary_path, dropped)
    name = directory.name + tail
    notes.extend(_missing_notes(name, summary, records, samples))
    shard = shard_position(summary.shard if summary else None)
    shard = shard or _common_shard(records) or shard_tail(summary_path)[1]
    bench_fields = any(r.target or r.session is not None or r.shard is not None for r in records)
    return RunPart(
        # records alone, without bench's fields or files, are a probe's (a renamed file)
        kind="bench" if summary or samples or bench_fields else "probe",
        key=_bench_key(directory, summary, records, shard),
        label=(summary.label if summary and summary.label else directory.name),
        source=directory if not tail else directory / f"*{tail}*",
        records=tuple(records),
        samples=tuple(samples),
        bench=summary,
        model=summary.model if summary else None,
        shard=shard,
        notes=tuple(notes),
    )


def _missing_notes(
    name: str,
    summary: BenchSummary | None,
    records: Sequence[RequestRecord],
    samples: Sequence[Sample],
) -> list[str]:
    out = []
    if summary is None:
        out.append(f"{name}: no readable {BENCH_SUMMARY}; figures from the records")
    if not records:
        out.append(f"{name}: no request records; figures from {BENCH_SUMMARY} only")
    if not samples:
        out.append(f"{name}: no samples.jsonl; queue and hit-rate timelines come from the records")
    return out


def _common_shard(records: Iterable[RequestRecord]) -> tuple[int, int] | None:
    shards = {shard_position(r.shard) for r in records} - {None}
    return shards.pop() if len(shards) == 1 else None


def _bench_key(
    directory: Path,
    summary: BenchSummary | None,
    records: Sequence[RequestRecord],
    shard: tuple[int, int] | None,
) -> str:
    """What makes shards one run: the run id, else the seeded workload they slice."""
    seed = summary.seed if summary else None
    label = summary.label if summary else None
    run_id = summary.run_id if summary and summary.run_id else None
    if run_id is None and records:  # bench derives it from the workload: equal in every shard
        run_id = Counter(r.run_id for r in records).most_common(1)[0][0]
    if run_id is not None:
        return f"bench:{run_id}"
    if shard is not None and seed is not None:  # the same seeded workload, sliced
        return f"bench:seed={seed}:shards={shard[1]}:label={label or ''}"
    return f"bench:dir={directory.resolve()}"


def merge_parts(parts: Sequence[RunPart]) -> list[Run]:
    """Shards of one run as one run; every other part a run of its own; first-seen order.

    A shard joins the first run with its key and shard count that lacks its index. Bench's
    run id is a hash of the workload, so two unsharded runs of one workload (before and
    after a change) share it and must stay apart; a shard index given twice starts another
    run for the same reason.

    >>> a, b, c = (RunPart(kind="bench", key="k", label="x", source=Path(n), shard=s)
    ...            for n, s in (("a", (1, 2)), ("b", (2, 2)), ("c", (1, 2))))
    >>> [(r.label, len(r.parts)) for r in merge_parts([a, b, c])]
    [('x', 2), ('x (2)', 1)]
    """
    groups: list[list[RunPart]] = []
    for part in parts:
        home = next((g for g in groups if _joins(g, part)), None)
        if home is None:
            groups.append([part])
        else:
            home.append(part)
    runs = [_merged(group) for group in groups]
    return _unique_labels(runs)


def _joins(group: Sequence[RunPart], part: RunPart) -> bool:
    first = group[0]
    if part.kind != "bench" or part.shard is None or part.shard[1] < 2:
        return False
    if first.kind != part.kind or first.key != part.key or first.shard is None:
        return False
    taken = {p.shard[0] for p in group if p.shard is not None}
    return first.shard[1] == part.shard[1] and part.shard[0] not in taken


def _unique_labels(runs: list[Run]) -> list[Run]:
    """Labels name runs in legends: a repeated one gets " (2)", " (3)", …"""
    seen: Counter[str] = Counter()
    out = []
    for run in runs:
        seen[run.label] += 1
        if seen[run.label] > 1:
            run = dataclasses.replace(run, label=f"{run.label} ({seen[run.label]})")
        out.append(run)
    return out


def _merged(parts: list[RunPart]) -> Run:
    first = parts[0]
    labels = {p.label for p in parts}
    more = len(parts) - 1
    label = labels.pop() if len(labels) == 1 else f"{first.label} (+{more} shard{'s' * (more > 1)})"
    notes = [n for p in parts for n in p.notes]
    notes.extend(shard_notes(parts))
    return Run(kind=first.kind, key=first.key, label=label, parts=tuple(parts), notes=tuple(notes))


def shard_notes(parts: Sequence[RunPart]) -> list[str]:
    """The shards missing from one run's parts.

    >>> p = [RunPart(kind="bench", key="k", label="x", source=Path("a"), shard=(1, 3))]
    >>> shard_notes(p)
    ['shards 2, 3 of 3 are missing: the figures cover part of the workload']
    """
    shards = [p.shard for p in parts if p.shard is not None]
    if not shards:
        return []
    count = max(c for _, c in shards)
    missing = sorted(set(range(1, count + 1)) - {i for i, _ in shards})
    if not missing:
        return []
    if len(missing) == 1:
        return [f"shard {missing[0]} of {count} is missing: the figures cover part of the workload"]
    which = ", ".join(map(str, missing))
    return [f"shards {which} of {count} are missing: the figures cover part of the workload"]
