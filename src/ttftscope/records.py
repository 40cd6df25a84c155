"""Per-request records and run summaries (pydantic, versioned), written as JSONL.

Records are appended and flushed one per line as each request finishes, so a run that is
killed leaves every finished record readable. Field names carry their unit (``_ms``).

What a line on disk holds is a record after two documented changes, because JSON lines are
UTF-8 and split at ``\\n`` only: a lone surrogate in any text becomes U+FFFD (it has no UTF-8
form; see :func:`clean_text`), and a non-finite float (nan, inf) becomes ``null`` (no value).

A record's ``schema_version`` says which fields its writer knew. Version 1 was written as
``ProbeRecord``; version 2 names it :class:`RequestRecord`, since probe, bench and
instrumented clients all write it, with the same fields. Version 3 adds what traces tell
(``trace_id``, ``request_id``, ``part_sources``, ``gateway_ms``, ``spans``), each empty by
default. Lines of an
older version are read as the current one (:meth:`RequestRecord.upgrade`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

from ttftscope.errors import ConfigError, FailureKind

SCHEMA_VERSION = 3
M = TypeVar("M", bound=BaseModel)

Phase = Literal["warmup", "cold", "warm"]
# chat: chat text to /v1/chat/completions; text / ids: the A/B pair on /v1/completions;
# direct / gateway: chat straight to the server and through the token-id gateway;
# messages / responses: the Anthropic Messages and OpenAI Responses APIs (bench --api);
# non_ascii: the chat series' text in non-ASCII letters (probe --non-ascii)
Variant = Literal["chat", "text", "ids", "direct", "gateway", "messages", "responses", "non_ascii"]
# where a server-side figure of a record came from: vLLM's own span for this request (exact
# under any concurrency), a /metrics histogram delta around it (exact one request at a
# time), or nowhere
PartSource = Literal["span", "histogram", "none"]
# the figures a source is recorded for (RequestRecord.part_sources)
ServerPart = Literal[
    "server_ttft_ms", "queue_ms", "prefill_ms", "server_frontend_ms", "server_render_ms"
]
# who measured a span: our client, our gateway, or the server (vLLM)
SpanService = Literal["client", "gateway", "server"]
# The notes on records of ttftscope's own work, which no finding about the user's client
# reads: a probe's chat variant counts the prompt's tokens with ttftscope's tokenizer before
# sending; every request of the live doctor's short probe is its own (the user's own
# client's tokenization is what instrument times).
PROBE_TOKENIZED = "client tokenization by ttftscope's probe (its tokenizer), not your client's"
DOCTOR_PROBE = "the doctor's own probe (its client tokenization is ttftscope's)"


class SpanTiming(BaseModel):
    """One span of a request's trace, in ms from the start of the record's client work.

    >>> SpanTiming(service="gateway", name="encode", start_ms=1.5, end_ms=4.0).duration_ms
    2.5
    """

    service: SpanService
    name: str
    # finite: a line stores nan as null, which a required float could not read back
    start_ms: float = Field(allow_inf_nan=False)
    end_ms: float = Field(allow_inf_nan=False)
    # a count the span carries (tokens reused / encoded), by attribute name
    counts: dict[str, int] = Field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms


class RequestRecord(BaseModel):
    """One request of a probe, a bench or an instrumented client: client phases, server view.

    >>> RequestRecord(run_id="r", index=0, variant="chat", phase="cold", ok=True).schema_version
    3
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
    # the front end's own rendering and tokenization, measured by the server (vLLM 0.34+:
    # vllm:request_render_duration_seconds; chat, messages and completions, not Responses)
    server_render_ms: float | None = None
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
    # ttftscope bench only (None in probe records). ``index`` is then the request's place in
    # the whole seeded workload (warmups negative), the same in every shard, so shards merge.
    target: str | None = None  # "direct" or the NAME of --target NAME=URL
    session: int | None = None
    turn: int | None = None
    shard: str | None = None  # "I/N" of --shard
    attempt: int | None = None  # 1; 2.. when a 429 was retried after its Retry-After
    queue_wait_ms: float | None = None  # waited on the client for a --max-concurrency slot
    e2el_ms: float | None = None  # start of client work to the stream's last byte
    tpot_ms: float | None = None  # (e2el - ttft) / (completion_tokens - 1)
    itl_mean_ms: float | None = None  # mean gap between content chunks
    itl_max_ms: float | None = None
    content_chunks: int | None = None  # network chunks that carried content (gaps = n - 1)
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
    # traces (ttftscope.tracing): the trace id sent as traceparent and X-Request-Id, where
    # each server figure came from, and the trace's spans when they were received
    trace_id: str | None = None
    # sent as X-Request-Id: what vLLM's span names this request by (the trace id when the
    # trace is ours; a fresh id when the caller's traceparent may be shared by many requests)
    request_id: str | None = None
    part_sources: dict[ServerPart, PartSource] = Field(default_factory=dict)
    gateway_ms: float | None = None  # the gateway's own work: received to sent upstream
    spans: list[SpanTiming] = Field(default_factory=list)

    @property
    def ttftscopes_own(self) -> bool:
        """Whether ttftscope sent this request for its own measurement (its client
        tokenization is ttftscope's, not the user's client's).

        >>> RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
        ...               notes=[PROBE_TOKENIZED]).ttftscopes_own
        True
        """
        return DOCTOR_PROBE in self.notes or PROBE_TOKENIZED in self.notes

    @field_validator("schema_version")
    @classmethod
    def upgrade(cls, version: int) -> int:
        """The version a line is read as: 1 (``ProbeRecord``) and 2 as 3, any other as it says.

        Versions 1 and 2 have the fields of version 3 but the trace fields, which default to
        empty. A field validator, not a model one: a model
        validator takes reading off pydantic's JSON fast path (measured ~3x slower a line).

        >>> RequestRecord.upgrade(1), RequestRecord.upgrade(2), RequestRecord.upgrade(3)
        (3, 3, 3)
        """
        return SCHEMA_VERSION if version in (1, 2) else version


_SURROGATE = re.compile("[\ud800-\udfff]")
# str.splitlines() (and so editors and most line tools) also ends lines at these; JSON
# escapes the other ones (control characters) already.
_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def clean_text(text: str) -> str:
    """``text`` as valid Unicode: a surrogate pair becomes its character, a lone one U+FFFD.

    Lone surrogates come from JSON escapes such as ``"\\ud800"``; UTF-8 cannot encode them.

    >>> clean_text("ok \\ud83d\\ude00 \\ud800!")
    'ok 😀 �!'
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _cleaned(value: object) -> object:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cleaned(v) for v in value]
    return value


def record_line(record: BaseModel, *, exclude: set[str] | None = None) -> str:
    """The JSON line (without its ``\\n``) :class:`RecordWriter` writes for ``record``.

    >>> rec = RequestRecord(run_id="a\\u2028b", index=0, variant="chat", phase="cold", ok=True)
    >>> line = record_line(rec)
    >>> "\\\\u2028" in line, "\\u2028" in line, line.splitlines() == [line]
    (True, False, True)
    """
    # Lone surrogates have no UTF-8 form: pydantic fails on them in values and mangles them
    # into three U+FFFD in dict keys, so every text is cleaned before it is dumped.
    clean = type(record).model_validate(_cleaned(record.model_dump()))
    return clean.model_dump_json(exclude=exclude).translate(_LINE_BREAKS)


class RecordWriter:
    """Append records to a JSONL file, one flushed line per record.

    >>> import tempfile; d = tempfile.mkdtemp()
    >>> with RecordWriter(Path(d) / "r.jsonl") as w:
    ...     w.write(RequestRecord(run_id="r", index=0, variant="chat", phase="cold", ok=True))
    """

    def __init__(self, path: Path, *, exclude: set[str] | None = None) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            torn = _ends_mid_line(path)
            self._fh: IO[str] = path.open("a", encoding="utf-8")
            if torn:  # a killed writer's half line must not swallow our first record
                self._fh.write("\n")
        except OSError as exc:
            raise ConfigError(
                f"cannot write records to {path}: {exc.strerror or exc}",
                hint="pick a writable --result-dir",
            ) from None
        self.path = path
        self.exclude = exclude or set()

    def write(self, record: BaseModel) -> None:
        """Append one record as a JSON line (:func:`record_line`) and flush it to disk."""
        self._fh.write(record_line(record, exclude=self.exclude) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file; every record written is already on disk."""
        self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_mid_line(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        if fh.seek(0, os.SEEK_END) == 0:
            return False
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


@dataclass(frozen=True)
class RecordsRead:
    """The records of a file and the 1-based numbers of the lines that held none.

    >>> RecordsRead([], skipped_lines=(3,)).skipped
    1
    """

    records: list[RequestRecord]
    skipped_lines: tuple[int, ...] = ()

    @property
    def skipped(self) -> int:
        """How many non-blank lines were not records (torn, not UTF-8, not JSON, invalid)."""
        return len(self.skipped_lines)


def read_records_report(path: Path) -> RecordsRead:
    """Read every complete record and say which lines were skipped (torn by a kill, edited).

    Lines end at ``\\n`` only; blank lines are ignored. A missing file has no records.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.jsonl"
    >>> with RecordWriter(p) as w:
    ...     w.write(RequestRecord(run_id="r", index=0, variant="chat", phase="cold", ok=True))
    >>> with p.open("ab") as fh:
    ...     _ = fh.write(b'{"run_id": "r\\xc3')  # killed mid-character
    >>> got = read_records_report(p)
    >>> len(got.records), got.skipped_lines
    (1, (2,))
    """
    try:
        records, skipped = valid_lines(path, RequestRecord)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    return RecordsRead(records, skipped)


def valid_lines(path: Path, model: type[M]) -> tuple[list[M], tuple[int, ...]]:
    """Every ``\n``-ended line of ``path`` that is a valid ``model``; numbers of the rest.

    Blank lines are ignored and a missing file has none; other ``OSError`` s are the
    caller's to explain (a records file and a samples file say different things).

    >>> valid_lines(Path("/nonexistent.jsonl"), RequestRecord)
    ([], ())
    """
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return [], ()
    items: list[M] = []
    skipped: list[int] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:  # pydantic's parser also rejects bad UTF-8, huge numbers and deep nesting
            items.append(model.model_validate_json(line))
        except ValidationError:
            skipped.append(number)
    return items, tuple(skipped)


def _unreadable(path: Path, exc: OSError) -> ConfigError:
    if path.is_dir():
        return ConfigError(
            f"{path} is a directory, not a records file",
            hint="pass one of the .jsonl files in it (a probe writes probe-<time>.jsonl)",
        )
    return ConfigError(
        f"cannot read records from {path}: {exc.strerror or exc}",
        hint="check the path and its permissions; records are the .jsonl files a probe "
        "writes to --result-dir",
    )


def read_records(path: Path) -> list[RequestRecord]:
    """Read every complete record; a torn line (killed writer) is skipped.

    :func:`read_records_report` also says which lines were skipped.

    >>> read_records(Path("/nonexistent.jsonl"))
    []
    """
    return read_records_report(path).records


def failure_tally(records: Sequence[RequestRecord]) -> dict[str, dict[str, Any]]:
    """Failed requests by kind: how many, the first message (already redacted), its status.

    The ``failures`` table of probe and bench summaries.

    >>> failure_tally([RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=False,
    ...                            error_kind="server_error", error="500", status=500)])
    {'server_error': {'count': 1, 'example': '500', 'status': 500}}
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if not r.ok:
            kind = str(r.error_kind or FailureKind.REQUEST_ERROR)
            entry = out.setdefault(kind, {"count": 0, "example": r.error, "status": r.status})
            entry["count"] += 1
    return out
