"""What a bench run is asked to do, and the parsers of the flags that say it.

Names follow ``vllm bench serve`` where they mean the same (``--max-concurrency``,
``--request-rate``, ``--num-prompts``, ``--num-warmups``, ``--metric-percentiles``). Every
parser raises :class:`~ttftscope.errors.ConfigError` naming the flag and showing an example.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson

from ttftscope.bench.plan.traces import COMPACTION_SHARE, TRACE_APPENDS, AppendShape
from ttftscope.client.apis import APIS, Api
from ttftscope.client.apis import parse_api as _parse_api
from ttftscope.config.checks import check_base_url
from ttftscope.errors import ConfigError
from ttftscope.results.summaries import shard_position

# Larger than any model's context today; a bound, so a typo cannot build gigabytes of text.
MAX_CONTEXT_TOKENS = 10_000_000
# Keys the workload owns: an --extra-body that set them would replace the prompt (of any
# API: chat's and Anthropic's messages, Responses' input) or the streaming the measurement
# depends on.
RESERVED_BODY_KEYS = frozenset({"messages", "prompt", "input", "stream", "stream_options"})
DEFAULT_NUM_PROMPTS = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
_INT = re.compile(r"\d[\d_]*")


@dataclass(frozen=True)
class Shard:
    """The ``index``-th (1-based) of ``count`` disjoint slices of one seeded workload.

    Sessions are dealt round-robin: shard I of N runs the sessions whose number is I-1
    modulo N, so N shards together run every session exactly once.

    >>> s = Shard(2, 3); str(s), [n for n in range(7) if s.includes(n)]
    ('2/3', [1, 4])
    """

    index: int = 1
    count: int = 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def includes(self, session: int) -> bool:
        """Whether this shard runs session number ``session``."""
        return session % self.count == self.index - 1


@dataclass(frozen=True)
class ContextSizes:
    """Context sizes in tokens: a uniform range ``low-high`` or a list to deal from.

    >>> ContextSizes("range", (86000, 123000)).scaled(0.05)
    ContextSizes(kind='range', values=(4300, 6150))
    """

    kind: Literal["range", "list"]
    values: tuple[int, ...]

    def scaled(self, factor: float) -> ContextSizes:
        """Every size times ``factor`` (rounded), so a CPU server finishes the same shape."""
        return ContextSizes(self.kind, tuple(round(v * factor) for v in self.values))

    def __str__(self) -> str:
        if self.kind == "range":
            return f"{self.values[0]}-{self.values[1]}"
        return ",".join(str(v) for v in self.values)


# Where sessions start; the traces' median request (104,644 tokens) is near its midpoint.
DEFAULT_CONTEXT = ContextSizes("range", (86_000, 123_000))


@dataclass(frozen=True)
class TargetSpec:
    """One ``--target``: ``direct`` (the configured base URL) or ``NAME=URL``.

    >>> TargetSpec("gw", "http://127.0.0.1:8100/v1").url
    'http://127.0.0.1:8100/v1'
    """

    name: str
    url: str | None = None


@dataclass(frozen=True)
class BenchOptions:
    """Workload and load control of one run (of one shard). Defaults stop by themselves.

    ``request_rate`` and ``max_concurrency`` are totals over all shards; each shard takes
    its share (:meth:`shard_rate`, :meth:`shard_concurrency`).

    >>> BenchOptions().synthetic_prompts, BenchOptions(shard=Shard(1, 4), request_rate=8).shard_rate
    (100, 2.0)
    """

    sessions: int = 8
    api: Api | None = None  # None: chat, or a replay file's own API
    context_tokens: ContextSizes = DEFAULT_CONTEXT
    scale: float = 1.0
    think_time_s: float = 0.1
    shared_system_prompt: bool = False
    replay: Path | None = None
    seed: int = 0
    appends: AppendShape = TRACE_APPENDS  # tokens each turn appends (before --scale)
    compaction_share: float = COMPACTION_SHARE
    max_tokens: int | None = None  # None: the traces' median output (replay: model.max_tokens)
    max_concurrency: int | None = None
    request_rate: float = math.inf
    num_prompts: int | None = None  # None: 100 synthetic requests, or the whole replay file
    duration_s: float = 900.0
    num_warmups: int = 1
    percentiles: tuple[float, ...] = (50.0, 90.0, 99.0)
    extra_body: Mapping[str, object] = field(default_factory=dict)
    honour_retry_after: bool = False
    shard: Shard = Shard()
    label: str | None = None
    run_id: str | None = None  # None: derived from the workload, the same in every shard
    targets: tuple[TargetSpec, ...] = (TargetSpec("direct"),)
    sample_interval_s: float = 0.25
    drain_s: float = 30.0  # after --duration: how long requests in flight may still finish
    trace_port: int | None = None  # receive vLLM's spans here (127.0.0.1) for the run
    span_wait_s: float = 3.0  # how long a finished record waits for its span
    # a synthetic workload too long for the server's max_model_len is scaled down to fit (and
    # said so); False refuses it instead (the CLI's choice when --scale or --context-tokens
    # was given)
    fit_scale: bool = True

    @property
    def synthetic_prompts(self) -> int:
        """How many requests a synthetic workload has (all shards together)."""
        return DEFAULT_NUM_PROMPTS if self.num_prompts is None else self.num_prompts

    @property
    def shard_rate(self) -> float:
        """This shard's share of ``request_rate`` (Poisson streams add up to the total)."""
        return self.request_rate / self.shard.count

    @property
    def shard_concurrency(self) -> int | None:
        """This shard's share of ``max_concurrency``, rounded up.

        >>> BenchOptions(max_concurrency=5, shard=Shard(1, 2)).shard_concurrency
        3
        """
        if self.max_concurrency is None:
            return None
        return -(-self.max_concurrency // self.shard.count)

    def workload_key(self, replay_digest: str = "") -> str:
        """A short hash of everything that decides the requests' content and identity.

        Equal for every shard of one workload, so their records share a run id.

        >>> BenchOptions().workload_key() == BenchOptions(shard=Shard(2, 2)).workload_key()
        True
        """
        parts = (
            self.seed,
            self.sessions,
            str(self.context_tokens),
            self.scale,
            self.shared_system_prompt,
            replay_digest,
            self.api,
            self.appends,
            self.compaction_share,
            self.num_prompts,
            tuple(t.name for t in self.targets),
        )
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:10]


def _int(text: str, flag: str, example: str) -> int:
    if not _INT.fullmatch(text.strip()):
        raise ConfigError(
            f"{flag} {text!r} is not a whole number of tokens", hint=f"for example {flag} {example}"
        )
    return int(text.strip().replace("_", ""))


def parse_context_tokens(text: str) -> ContextSizes:
    """``"86000-123000"`` (a range) or ``"8000,32000"`` (a list) as :class:`ContextSizes`.

    >>> parse_context_tokens("86_000-123_000"), parse_context_tokens("0, 8000").values
    (ContextSizes(kind='range', values=(86000, 123000)), (0, 8000))
    """
    flag, example = "--context-tokens", "86000-123000 or 8000,32000"
    if "-" in text:
        low_text, _, high_text = text.partition("-")
        low, high = _int(low_text, flag, example), _int(high_text, flag, example)
        if low > high:
            raise ConfigError(
                f"{flag} {text!r}: the range's low end is above its high end",
                hint=f"for example {flag} 86000-123000",
            )
        sizes = ContextSizes("range", (low, high))
    else:
        values = tuple(_int(v, flag, example) for v in text.split(",") if v.strip())
        if not values:
            raise ConfigError(
                f"{flag} {text!r} names no size", hint=f"for example {flag} {example}"
            )
        sizes = ContextSizes("list", values)
    if max(sizes.values) > MAX_CONTEXT_TOKENS:
        raise ConfigError(
            f"{flag} {max(sizes.values):,} is above the largest context any model takes "
            f"({MAX_CONTEXT_TOKENS:,})",
            hint=f"give sizes in tokens, for example {flag} {example}",
        )
    return sizes


def parse_shard(text: str) -> Shard:
    """``"I/N"`` with 1 ≤ I ≤ N as a :class:`Shard`.

    >>> parse_shard("2/4")
    Shard(index=2, count=4)
    """
    position = shard_position(text)  # the reading reports use for summaries and records
    if position is None:
        raise ConfigError(
            f"--shard {text!r} is not I/N with 1 ≤ I ≤ N",
            hint="for example --shard 1/4 on the first of four machines, 4/4 on the last",
        )
    return Shard(*position)


def parse_rate(text: str) -> float:
    """Requests per second: a positive number, or ``inf`` (send as soon as sessions can).

    >>> parse_rate("inf"), parse_rate("2.5")
    (inf, 2.5)
    """
    try:
        rate = float(text.strip())
    except ValueError:
        rate = math.nan
    if math.isnan(rate) or rate <= 0 or (math.isinf(rate) and text.strip().lower() != "inf"):
        raise ConfigError(
            f"--request-rate {text!r} is not a positive number of requests per second",
            hint="for example --request-rate 4, or --request-rate inf",
        )
    return rate


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99"`` as numbers from 0 to 100.

    >>> parse_percentiles("50, 99.9")
    (50.0, 99.9)
    """
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(not (math.isfinite(q) and 0 <= q <= 100) for q in values):
        raise ConfigError(
            f"--metric-percentiles {text!r} needs numbers from 0 to 100",
            hint="for example --metric-percentiles 50,90,99",
        )
    return tuple(dict.fromkeys(values))


def parse_extra_body(text: str) -> dict[str, object]:
    """A JSON object merged into every request body (``{"ignore_eos": true}``).

    >>> parse_extra_body('{"ignore_eos": true}')
    {'ignore_eos': True}
    """
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"--extra-body is not JSON ({exc})",
            hint="""for example --extra-body '{"ignore_eos": true}'""",
        ) from None
    if not isinstance(body, dict):
        raise ConfigError(
            "--extra-body must be a JSON object", hint="""for example '{"ignore_eos": true}'"""
        )
    try:
        orjson.dumps(body)
    except TypeError:
        raise ConfigError(
            "--extra-body holds text UTF-8 cannot carry (a lone \\ud800-style escape)",
            hint="write the characters themselves, or escape a whole surrogate pair",
        ) from None
    taken = sorted(RESERVED_BODY_KEYS & body.keys())
    if taken:
        raise ConfigError(
            f"--extra-body sets {', '.join(taken)}, which the workload owns",
            hint="leave out messages, prompt, input, stream and stream_options; use --replay "
            "to send your own conversations",
        )
    return body


def parse_api(text: str) -> Api:
    """``--api``: ``chat``, ``messages`` (Anthropic, as Claude Code) or ``responses`` (Codex).

    >>> parse_api("responses")
    'responses'
    """
    try:
        return _parse_api(text)
    except ValueError:
        raise ConfigError(
            f"--api {text!r} is not one of {', '.join(APIS)}",
            hint="for example --api messages (Claude Code's API) or --api responses (Codex's)",
        ) from None


def parse_target(text: str) -> TargetSpec:
    """``direct`` or ``NAME=URL`` (an OpenAI-compatible base URL, such as a gateway's).

    >>> parse_target("direct"), parse_target("gw=http://127.0.0.1:8100/v1/").url
    (TargetSpec(name='direct', url=None), 'http://127.0.0.1:8100/v1')
    """
    example = "--target direct --target gateway=http://127.0.0.1:8100/v1"
    if text.strip() == "direct":
        return TargetSpec("direct")
    name, sep, url = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.fullmatch(name) or name == "direct":
        raise ConfigError(
            f"--target {text!r} is not 'direct' or NAME=URL (NAME: letters, digits, _ . -; "
            "'direct' is the configured base URL)",
            hint=f"for example {example}",
        )
    try:
        return TargetSpec(name, check_base_url(url.strip()))
    except ValueError as exc:
        raise ConfigError(
            f"--target {name}: the URL {exc}", hint=f"for example {example}"
        ) from None


def unique_targets(specs: tuple[TargetSpec, ...]) -> tuple[TargetSpec, ...]:
    """The targets in order; a name given twice is an error (records name targets).

    >>> [t.name for t in unique_targets((TargetSpec("direct"), TargetSpec("gw", "http://h/v1")))]
    ['direct', 'gw']
    """
    names = [t.name for t in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigError(f"--target {dup} is given twice", hint="give each target its own name")
    if not specs:
        raise ConfigError("no --target given", hint="for example --target direct")
    return specs
