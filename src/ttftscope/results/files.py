"""The files of a result directory, read leniently: request records, samples, summaries.

The summaries' schemas are in :mod:`~ttftscope.results.summaries`.

A report is often made from a run that was killed, from an older or newer writer, or from a
directory someone edited, so nothing here fails on a torn line or an unknown key: a line that
is no record is counted and skipped, a summary field of the wrong type is dropped and named.
Only an unreadable file (permissions, a directory where a file should be) is an error.

Request records are the shared schema (:class:`~ttftscope.records.RequestRecord`, read by
:func:`~ttftscope.records.read_records_report`); bench fills its optional fields (target,
session, turn, shard), a probe leaves them unset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ttftscope.errors import ConfigError
from ttftscope.records import valid_lines

M = TypeVar("M", bound=BaseModel)


class Sample(BaseModel):
    """One scrape of a server's ``/metrics`` by bench's sampler (every ~250 ms).

    Bench writes ``t_s`` (seconds since the measured requests began), ``t_wall``, the
    metrics ``source`` and the ``targets`` behind it; the shorter ``t``, ``target`` and
    ``kv_usage`` are read too. Counters (``prefix_hits``, ``prefix_queries``) are as
    scraped, cumulative.

    >>> s = Sample.model_validate_json('{"t_s": 0.25, "waiting": 3, "targets": ["direct"]}')
    >>> s.t, s.waiting, s.name
    (0.25, 3.0, 'direct')
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    t: float = Field(validation_alias=AliasChoices("t_s", "t"))
    t_wall: float | None = None
    ok: bool = True
    source: str | None = None
    target: str | None = None
    targets: list[str] = Field(default_factory=list)
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = Field(
        default=None, validation_alias=AliasChoices("kv_cache_usage", "kv_usage")
    )
    prefix_hits: float | None = None
    prefix_queries: float | None = None

    @property
    def name(self) -> str:
        """Whose line this is: the target(s) behind the server, else the server."""
        return self.target or ", ".join(self.targets) or self.source or "server"


def read_jsonl(path: Path, model: type[M]) -> tuple[list[M], tuple[int, ...]]:
    """Every line of ``path`` that is a valid ``model``, and the numbers of those that are not.

    Lines end at ``\\n`` only (as :class:`~ttftscope.records.RecordWriter` writes them); blank
    lines are ignored; a missing file has none.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "s.jsonl"
    >>> _ = p.write_text('{"t": 0}\\n\\nnot json\\n{"t": 0.5, "waiting": 2}\\n{"t": 1, "wai')
    >>> items, skipped = read_jsonl(p, Sample)
    >>> [s.t for s in items], skipped
    ([0.0, 0.5], (3, 5))
    """
    try:
        return valid_lines(path, model)
    except OSError as exc:
        raise _unreadable(path, exc) from None


def read_summary(path: Path, model: type[M]) -> tuple[M | None, tuple[str, ...]]:
    """A summary file as ``model``, and the top-level keys dropped for a bad value.

    A missing or unparsable file gives ``None``; a key whose value has the wrong type is
    left out rather than losing the whole summary.

    >>> from ttftscope.results.summaries import BenchSummary
    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "bench-summary.json"
    >>> _ = p.write_text('{"completed": 5, "duration": "long", "new_key": [1]}')
    >>> s, dropped = read_summary(p, BenchSummary)
    >>> s.completed, s.duration, dropped
    (5, None, ('duration',))
    """
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None, ()
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None, ()
    if not isinstance(data, dict):
        return None, ()
    dropped: list[str] = []
    while True:  # each pass drops the keys pydantic named; every pass removes at least one
        try:
            return model.model_validate(data), tuple(dropped)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} & set(data)
            if not bad:
                return None, tuple(dropped)
            dropped.extend(sorted(bad))
            data = {k: v for k, v in data.items() if k not in bad}


def _unreadable(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"cannot read {path}: {exc.strerror or exc}",
        hint="check the path and its permissions; a report reads the files probe and bench "
        "write to --result-dir",
    )
