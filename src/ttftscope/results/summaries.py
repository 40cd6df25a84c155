"""The summaries beside the records: ``bench-summary.json``'s schema, a probe's summary head.

One schema serves both sides. A report reads any summary leniently (every field optional:
it shows what a summary has and says what it lacks), bench checks the one it writes with
:meth:`BenchSummary.validate_written` (every key it always writes present, percentiles
numbers). Shard positions (``"I/N"``) are read here for both too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ttftscope.client.apis import Api

__all__ = ["BenchSummary", "BucketParts", "Figures", "ProbeSummaryHead", "shard_position"]

Num = float | None
_SHARD = re.compile(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*")


def shard_position(value: object) -> tuple[int, int] | None:
    """``"I/N"`` as ``(I, N)`` when ``1 ≤ I ≤ N``; anything else has no shard position.

    >>> shard_position("2/4"), shard_position("5/4"), shard_position(3), shard_position(None)
    ((2, 4), None, None, None)
    """
    if not isinstance(value, str):
        return None
    match = _SHARD.fullmatch(value)
    if match is None:
        return None
    index, count = int(match[1]), int(match[2])
    return (index, count) if 1 <= index <= count else None


class ProbeSummaryHead(BaseModel):
    """The parts of a probe's ``.summary.json`` a report shows (the records hold the rest).

    >>> ProbeSummaryHead.model_validate({"model": "m", "groups": []}).model
    'm'
    """

    model_config = ConfigDict(extra="ignore")

    run_id: str | None = None
    model: str | None = None
    base_url: str | None = None


def _missing(model: BaseModel, data: Mapping[str, Any], where: str) -> list[str]:
    """Declared keys bench always writes that ``data`` lacks, and percentiles not in ms."""
    optional: frozenset[str] = getattr(model, "NOT_ALWAYS_WRITTEN", frozenset())
    out = [f"{where}{k}" for k in type(model).model_fields if k not in optional and k not in data]
    for key, value in data.items():
        is_ms = key.startswith("p") and key.endswith("_ms")
        if is_ms and not (value is None or isinstance(value, int | float)):
            out.append(f"{where}{key} (not a number of milliseconds)")
    return out


class Figures(BaseModel):
    """Keys every set of requests has (the whole run, and each target ``targets.NAME``).

    Percentiles (``pNN_ttft_ms`` and the like) are extra keys: which ones depends on
    ``--metric-percentiles``.
    """

    model_config = ConfigDict(extra="allow")
    NOT_ALWAYS_WRITTEN: ClassVar[frozenset[str]] = frozenset({"p90_ttft_ms", "p99_ttft_ms"})

    completed: int | None = None
    failed: int | None = None
    rate_limited: int | None = None
    rate_limited_share: Num = None
    contaminated: bool | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: Num = None
    output_throughput: Num = None
    total_token_throughput: Num = None
    waited_share: Num = None
    mean_ttft_ms: Num = None
    median_ttft_ms: Num = None
    std_ttft_ms: Num = None
    p90_ttft_ms: Num = None
    p99_ttft_ms: Num = None
    mean_tpot_ms: Num = None
    median_tpot_ms: Num = None
    mean_itl_ms: Num = None
    median_itl_ms: Num = None
    mean_e2el_ms: Num = None
    median_e2el_ms: Num = None
    peak_waiting: Num = None  # a target's: the queue of the server behind it


class BucketParts(BaseModel):
    """One context bucket and target of ``parts_by_bucket`` (schema 2): per-request parts.

    Per part (``queue``, ``prefill``, ``server_frontend``, ``gateway``, ``outside_server``)
    the extra keys ``median_/p90_{part}_ms``, ``{part}_requests`` and ``{part}_sources``
    (requests per source: ``span``, ``histogram``); see ``results.request_parts``.

    >>> BucketParts.model_validate({"context": "8K–16K", "median_queue_ms": 2.0}).context
    '8K–16K'
    """

    model_config = ConfigDict(extra="allow")

    context_tokens: int | None = None
    context: str | None = None
    target: str | None = None
    requests: int | None = None


class BenchSummary(Figures):
    """``bench-summary.json``: ``vllm bench serve``'s flat keys plus the servers' figures.

    Every field is optional when read: a report shows what a summary has. The
    ``server_mean_*`` parts are histogram sums over counts of the whole run; schema 2 adds
    ``parts_by_bucket``, the per-request parts by context bucket and target (empty when no
    request had its own, and in summaries of schema 1).

    >>> s = BenchSummary.model_validate({"completed": 10, "server_mean_queue_ms": 4.5})
    >>> s.completed, s.server_mean_queue_ms, s.targets
    (10, 4.5, {})
    """

    NOT_ALWAYS_WRITTEN: ClassVar[frozenset[str]] = frozenset(
        {"label", "api", "p90_ttft_ms", "p99_ttft_ms"}
    )

    schema_version: int | None = None
    kind: str | None = None
    run_id: str | None = None
    label: str | None = None
    seed: int | None = None
    shard: str | None = None
    model: str | None = None
    api: Api = "chat"  # the API every request spoke (summaries before --api: chat)
    duration: Num = None
    warmups: int | None = None
    contamination_advice: str | None = None
    server_requests: Num = None
    server_mean_ttft_ms: Num = None
    server_mean_queue_ms: Num = None
    server_mean_prefill_ms: Num = None
    server_mean_frontend_ms: Num = None
    prefix_hit_rate: Num = None
    mean_waiting: Num = None
    failures: dict[str, dict[str, Any]] = Field(default_factory=dict)
    targets: dict[str, Figures] = Field(default_factory=dict)
    servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    parts_by_bucket: list[BucketParts] = Field(default_factory=list)

    @classmethod
    def validate_written(cls, data: Mapping[str, Any]) -> BenchSummary:
        """The summary bench is about to write, checked whole: a gap in it is a bug.

        >>> try:
        ...     BenchSummary.validate_written({"completed": 1, "p95_ttft_ms": "slow"})
        ... except ValueError as exc:
        ...     print(str(exc)[:36], "…", str(exc).split(", ")[-1])
        bench summary lacks failed, rate_lim … p95_ttft_ms (not a number of milliseconds)
        """
        summary = cls.model_validate(data)
        missing = _missing(summary, data, "")
        for name, figures in summary.targets.items():
            missing += _missing(figures, data["targets"][name], f"targets.{name}.")
        if missing:
            raise ValueError(f"bench summary lacks {', '.join(missing)}")
        return summary
