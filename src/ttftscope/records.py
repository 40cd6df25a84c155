"""Per-request records and run summaries (pydantic, versioned), written as JSONL.

Records are appended and flushed one per line as each request finishes, so a run that is
killed leaves every finished record readable. Field names carry their unit (``_ms``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, Field

from ttftscope.errors import ConfigError, FailureKind

SCHEMA_VERSION = 1

Phase = Literal["warmup", "cold", "warm"]
# chat: chat text to /v1/chat/completions; text / ids: the A/B pair on /v1/completions
Variant = Literal["chat", "text", "ids"]


class ProbeRecord(BaseModel):
    """One probe request, its client-side phases and the server's view of it.

    >>> ProbeRecord(run_id="r", index=0, variant="chat", phase="cold", ok=True).schema_version
    1
    """

    schema_version: int = SCHEMA_VERSION
    run_id: str
    index: int
    variant: Variant
    phase: Phase
    context_tokens_target: int = 0
    ok: bool
    status: int | None = None
    error_kind: FailureKind | None = None
    error: str | None = None
    retry_after: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # client side (milliseconds from the start of client work / from just before sending)
    client_ttft_ms: float | None = None
    wire_ttft_ms: float | None = None
    connect_ms: float | None = None
    request_sent_ms: float | None = None
    headers_ms: float | None = None
    first_event_ms: float | None = None
    last_byte_ms: float | None = None
    serialize_ms: float | None = None
    tokenize_ms: float | None = None
    client_tokens: int | None = None
    request_bytes: int | None = None
    # server side, from /metrics deltas around this request
    server_ttft_ms: float | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    server_frontend_ms: float | None = None
    outside_server_ms: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    prefix_hit_rate: float | None = None
    computed_tokens: float | None = None
    waiting_before: float | None = None
    # consistency checks that can fail (see decompose.run_checks)
    checks: dict[str, bool] = Field(default_factory=dict)
    contaminated: bool = False
    notes: list[str] = Field(default_factory=list)
    t_wall: float | None = None


class RecordWriter:
    """Append records to a JSONL file, one flushed line per record.

    >>> import tempfile; d = tempfile.mkdtemp()
    >>> with RecordWriter(Path(d) / "r.jsonl") as w:
    ...     w.write(ProbeRecord(run_id="r", index=0, variant="chat", phase="cold", ok=True))
    """

    def __init__(self, path: Path, *, exclude: set[str] | None = None) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: IO[str] = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot write records to {path}: {exc.strerror}",
                hint="pick a writable --result-dir",
            ) from None
        self.path = path
        self.exclude = exclude or set()

    def write(self, record: BaseModel) -> None:
        """Append one record as a JSON line and flush it to disk."""
        self._fh.write(record.model_dump_json(exclude=self.exclude) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file; every record written is already on disk."""
        self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: Path) -> list[ProbeRecord]:
    """Read every complete record; a torn last line (killed writer) is skipped.

    >>> read_records(Path("/nonexistent.jsonl"))
    []
    """
    if not path.exists():
        return []
    out: list[ProbeRecord] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(ProbeRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError):
            continue
    return out
