"""``ttftscope bench``: many concurrent agent sessions; TTFT percentiles and the queue.

Thin: parse the flags into :class:`~ttftscope.bench.options.BenchOptions`, run
:func:`~ttftscope.bench.runner.run_bench` with a live progress line, print the table (or
the summary JSON). A failure that stopped the run exits with its own code, after the
summary of what finished is written and shown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from ttftscope.bench.options import (
    BenchOptions,
    parse_api,
    parse_context_tokens,
    parse_extra_body,
    parse_percentiles,
    parse_rate,
    parse_shard,
    parse_target,
)
from ttftscope.bench.output.table import print_bench_summary
from ttftscope.cli.bench_progress import BenchProgress
from ttftscope.cli.console import make_console
from ttftscope.cli.extras import require_extra
from ttftscope.cli.options import CliState, cli_state, dumps, endpoint_options, excluded_fields
from ttftscope.client.apis import APIS
from ttftscope.client.endpoint import Endpoint
from ttftscope.client.stream import StreamResult, raise_for_result
from ttftscope.localstate import trace_port_for
from ttftscope.records import RequestRecord
from ttftscope.tokenization.loader import load_tokenizer
from ttftscope.tracing.emit import open_emitter

if TYPE_CHECKING:
    from ttftscope.bench.runner import BenchRun

__all__ = ["bench"]

T = TypeVar("T")


@dataclass(frozen=True)
class BenchArgs:
    """The bench's own command-line options, as given."""

    sessions: int
    context_tokens: str
    scale: float
    think_time_s: float
    shared_system_prompt: bool
    replay: Path | None
    seed: int
    max_tokens: int | None
    max_concurrency: int | None
    request_rate: str
    num_prompts: int | None
    duration: float
    num_warmups: int
    metric_percentiles: str
    result_dir: Path | None
    label: str | None
    extra_body: str | None
    target: tuple[str, ...]
    honour_retry_after: bool
    shard: str
    run_id: str | None
    as_json: bool
    api: str | None = None  # None: chat, or a replay file's own API
    sizes_given: bool = False  # --scale or --context-tokens given: never scaled to fit

    def options(self) -> BenchOptions:
        """The parsed options; :class:`~ttftscope.errors.ConfigError` names a bad flag."""
        return BenchOptions(
            sessions=self.sessions,
            api=None if self.api is None else parse_api(self.api),
            context_tokens=parse_context_tokens(self.context_tokens),
            scale=self.scale,
            think_time_s=self.think_time_s,
            shared_system_prompt=self.shared_system_prompt,
            replay=self.replay,
            seed=self.seed,
            max_tokens=self.max_tokens,
            max_concurrency=self.max_concurrency,
            request_rate=parse_rate(self.request_rate),
            num_prompts=self.num_prompts,
            duration_s=self.duration,
            num_warmups=self.num_warmups,
            percentiles=parse_percentiles(self.metric_percentiles),
            extra_body=parse_extra_body(self.extra_body) if self.extra_body else {},
            honour_retry_after=self.honour_retry_after,
            shard=parse_shard(self.shard),
            label=self.label,
            run_id=self.run_id,
            targets=tuple(parse_target(t) for t in self.target or ("direct",)),
            fit_scale=not self.sizes_given,
        )


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop: the load generator's event loop is its measuring clock.

    >>> async def two() -> int:
    ...     return 2
    >>> run_loop(two())
    2
    """
    import uvloop  # the bench extra's

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def execute_bench(state: CliState, args: BenchArgs) -> BenchRun:
    """Run a bench with the CLI's settings, showing progress; print and return the run.

    Raises the failure that stopped the run, or the first failure when nothing completed.

    What ``ttftscope bench`` does once its flags are parsed into ``args`` (a ``BenchArgs``)::

        run = execute_bench(CliState(), args)  # prints the live table, then the summary
    """
    require_extra("bench")
    opts = args.options()
    s = state.load().settings
    ep = Endpoint.from_settings(s, headers=state.headers)
    if opts.trace_port is None:
        opts = dataclasses.replace(opts, trace_port=trace_port_for(s, ep.base_url))
    label = (opts.label or "bench").replace("/", "-")
    result_dir = args.result_dir or Path("ttftscope-results") / time.strftime(
        f"{label}-%Y%m%d-%H%M%S"
    )
    run = _run(state, ep, opts, result_dir)
    _print(run, args.as_json)
    run.raise_for_abort()
    _fail_if_nothing_completed(run.records)
    return run


def _run(state: CliState, ep: Endpoint, opts: BenchOptions, result_dir: Path) -> BenchRun:
    """The run itself, on uvloop, with the live progress line and the span emitter."""
    from ttftscope.bench.hooks import Hooks
    from ttftscope.bench.runner import run_bench  # aiohttp: the bench extra's

    s = state.load().settings
    tok = None if s.tokenizer.path is None else load_tokenizer(s.tokenizer.path)
    count: Callable[[str], int] | None = None if tok is None else (lambda t: len(tok.encode(t)))
    emitter = open_emitter(s.observability.otlp_endpoint, command="bench")
    with BenchProgress(state.err) as progress:
        hooks = Hooks(
            on_stage=progress.stage,
            on_start=progress.start,
            on_record=progress.record,
            on_sample=progress.sample,
            on_note=progress.note,
            on_warmup=progress.warmup,
        )
        coro = run_bench(
            ep,
            opts,
            result_dir=result_dir,
            count_tokens=count,
            hooks=hooks,
            exclude=excluded_fields(s.observability),
            emitter=emitter,
        )
        try:
            return run_loop(coro)
        except KeyboardInterrupt:
            state.err.print(f"interrupted: finished requests and the summary are in {result_dir}")
            raise
        finally:
            if emitter is not None:
                emitter.shutdown()


def _print(run: BenchRun, as_json: bool) -> None:
    if as_json:
        click.echo(dumps(run.summary))
        return
    print_bench_summary(run.summary, make_console())
    click.echo(f"records: {run.files.records}")
    click.echo(f"samples: {run.files.samples}")
    click.echo(f"summary: {run.files.summary}")


def _fail_if_nothing_completed(records: list[RequestRecord]) -> None:
    measured = [r for r in records if r.phase != "warmup"]
    if not measured or any(r.ok for r in measured):
        return
    first = measured[0]
    raise_for_result(
        StreamResult(
            ok=False,
            error_kind=first.error_kind,
            error=first.error,
            status=first.status,
            retry_after=first.retry_after,
        )
    )


F = TypeVar("F", bound=Callable[..., Any])


def _workload_options(func: F) -> F:
    opts = [
        click.option("--sessions", default=8, show_default=True, type=click.IntRange(1, 10_000),
                     help="Concurrent coding-agent sessions"),
        click.option("--api", type=click.Choice(APIS),
                     help="The API requests speak: chat (default), messages (Anthropic, as "
                     "Claude Code) or responses (OpenAI Responses, as Codex); --replay: "
                     "the file's own"),
        click.option("--context-tokens", default="86000-123000", show_default=True,
                     help="Session context sizes (tools and system prompt included): a range "
                     "LOW-HIGH or a list 8000,32000"),
        click.option("--scale", default=1.0, show_default=True,
                     type=click.FloatRange(0, 10, min_open=True),
                     help="Multiply every size: contexts, tools, system prompt, appends "
                     "(0.05: a CPU server finishes)"),
        click.option("--think-time-s", default=0.1, show_default=True,
                     type=click.FloatRange(0, 3600), help="Mean pause between a session's turns"),
        click.option("--shared-system-prompt", is_flag=True,
                     help="All sessions share one system prompt (the smallest context less tools)"),
        click.option("--replay", type=click.Path(path_type=Path, dir_okay=False),
                     help="JSONL of chat, Anthropic Messages or Responses request bodies to "
                     "replay as sessions"),
        click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**63 - 1)),
        click.option("--max-tokens", type=click.IntRange(1, 1_000_000),
                     help="Tokens to generate per request (default: 216, the agent traces' "
                     "median; --replay: each body's own, else model.max_tokens)"),
    ]  # fmt: skip
    for opt in reversed(opts):
        func = opt(func)
    return func


def _load_options(func: F) -> F:
    opts = [
        click.option("--max-concurrency", type=click.IntRange(1, 100_000),
                     help="Most requests in flight at once (all shards together)"),
        click.option("--request-rate", default="inf", show_default=True,
                     help="Poisson arrivals per second (all shards together), or inf"),
        click.option("--num-prompts", type=click.IntRange(1, 1_000_000),
                     help="Requests in the workload (default 100, or the whole replay)"),
        click.option("--duration", default=900.0, show_default=True,
                     type=click.FloatRange(0, 86_400, min_open=True),
                     help="Stop sending after this many seconds"),
        click.option("--num-warmups", default=1, show_default=True,
                     type=click.IntRange(0, 1_000), help="Unmeasured requests per target first"),
        click.option("--metric-percentiles", default="50,90,99", show_default=True),
        click.option("--result-dir", type=click.Path(path_type=Path, file_okay=False),
                     help="Records, samples and summary go here (default: ttftscope-results/)"),
        click.option("--label", help="A name for this run, kept in the summary"),
        click.option("--extra-body", help="JSON object merged into every request body"),
        click.option("--target", multiple=True,
                     help="direct (the base URL) or NAME=URL, repeatable; requests alternate"),
        click.option("--honour-retry-after", is_flag=True,
                     help="After a 429, wait its Retry-After and retry (at most twice)"),
        click.option("--shard", default="1/1", show_default=True,
                     help="Run the I-th of N disjoint slices of the workload: I/N"),
        click.option("--run-id", help="Run id shared by all shards (default: from the workload)"),
        click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON"),
    ]  # fmt: skip
    for opt in reversed(opts):
        func = opt(func)
    return func


@click.command()
@endpoint_options
@_workload_options
@_load_options
@click.pass_context
def bench(ctx: click.Context, /, **flags: Any) -> None:
    """Load-test with concurrent agent sessions: TTFT percentiles, queue, server parts."""
    # click passes exactly the options above, each named as a BenchArgs field
    given = any(ctx.get_parameter_source(p) != ParameterSource.DEFAULT for p in _SIZES)
    execute_bench(cli_state(ctx), BenchArgs(**flags, sizes_given=given))


_SIZES = ("scale", "context_tokens")  # the user's own sizes are refused, not scaled, unfit
