"""``ttftscope probe``: time requests and split each TTFT."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from ttftscope.cli.console import make_console
from ttftscope.cli.options import (
    CliState,
    cli_state,
    dumps,
    endpoint_options,
    excluded_fields,
    run_async,
)
from ttftscope.cli.progress import RequestProgress
from ttftscope.client.endpoint import Endpoint
from ttftscope.client.stream import StreamResult, raise_for_result
from ttftscope.config.schema import (
    Settings,
)
from ttftscope.errors import ConfigError
from ttftscope.localstate import trace_port_for
from ttftscope.probe.experiments import AbMode, ProbeOptions, run_probe
from ttftscope.probe.summary import summarize_probe
from ttftscope.records import RecordWriter, RequestRecord
from ttftscope.report.terminal import print_probe_summary
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer
from ttftscope.tracing.emit import open_emitter

__all__ = ["ProbeArgs", "parse_numbers", "probe", "probe_options", "run_probe_command"]

N = TypeVar("N", int, float)
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ProbeArgs:
    """The probe's own command-line options, as given."""

    context_tokens: str
    repeat: int
    num_warmups: int
    max_tokens: int | None
    ab: AbMode | None
    seed: int
    result_dir: Path | None
    metric_percentiles: str
    as_json: bool
    wide: bool
    gateway_url: str | None = None
    non_ascii: bool = False


def parse_numbers(text: str, what: str, cast: Callable[[str], N]) -> list[N]:
    """Parse ``"0,8000,32000"``; a clear error names the flag and shows an example."""
    try:
        values = [cast(v.strip().replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(
            f"{what} {text!r} is not a comma-separated list of numbers",
            hint=f"for example {what} " + ("0,8000,32000" if cast is int else "50,90,99"),
        ) from None
    # ints are compared as ints: float() of a 400-digit number overflows
    if not values or any(v < 0 or (isinstance(v, float) and not math.isfinite(v)) for v in values):
        raise ConfigError(
            f"{what} {text!r} needs at least one value, each a finite number, none negative",
            hint=f"for example {what} " + ("0,8000,32000" if cast is int else "50,90,99"),
        )
    return values


def _request_logger(state: CliState) -> Callable[[RequestRecord], None] | None:
    s = state.load().settings
    if not (s.debug.log_request_timing or s.debug.log_token_count):
        return None

    def log(rec: RequestRecord) -> None:
        parts = [f"#{rec.index} {rec.variant}/{rec.phase} ctx={rec.context_tokens_target}"]
        if s.debug.log_request_timing:
            parts.append(
                f"ttft={_fmt(rec.client_ttft_ms)}ms server={_fmt(rec.server_ttft_ms)}ms "
                f"queue={_fmt(rec.queue_ms)}ms prefill={_fmt(rec.prefill_ms)}ms"
            )
        if s.debug.log_token_count:
            parts.append(f"prompt_tokens={rec.prompt_tokens} client_tokens={rec.client_tokens}")
        if not rec.ok:
            parts.append(f"FAILED {rec.error_kind}: {rec.error}")
        state.err.print(" ".join(parts), highlight=False)

    return log


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def _open_writer(s: Settings, result_dir: Path | None) -> RecordWriter | None:
    if result_dir is None and s.debug.log_request_timing:
        result_dir = Path("ttftscope-results")
    if result_dir is None:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return RecordWriter(
        result_dir / f"probe-{stamp}.jsonl", exclude=excluded_fields(s.observability)
    )


def _local_tokenizer(s: Settings) -> Tokenizer | None:
    return None if s.tokenizer.path is None else load_tokenizer(s.tokenizer.path)


def execute_probe(
    state: CliState, opts: ProbeOptions, args: ProbeArgs, percentiles: list[float]
) -> dict[str, Any]:
    """Run a probe with the CLI's settings; print the table (or JSON); return the summary.

    Exits with the first failure's error code when no request produced a usable sample.
    """
    s = state.load().settings
    ep = Endpoint.from_settings(s, headers=state.headers)
    if opts.trace_port is None:
        opts.trace_port = trace_port_for(s, ep.base_url)
    tok = _local_tokenizer(s)
    writer = _open_writer(s, args.result_dir)
    log = _request_logger(state)
    emitter = open_emitter(s.observability.otlp_endpoint, command="probe")
    try:
        with RequestProgress(opts.total_requests, state.err) as progress:

            def on_record(rec: RequestRecord) -> None:
                if log is not None:
                    log(rec)
                progress.record(rec)

            run = run_async(
                run_probe(
                    ep,
                    opts,
                    writer=writer,
                    on_record=on_record,
                    local_tokenizer=tok,
                    on_stage=progress.stage,
                    emitter=emitter,
                )
            )
    finally:
        if writer is not None:
            writer.close()
        if emitter is not None:
            emitter.shutdown()
    summary = summarize_probe(
        run.records, model=run.model, base_url=ep.base_url, percentiles=percentiles
    )
    summary["run_id"] = run.run_id
    if writer is not None:
        summary["records_path"] = str(writer.path)
        writer.path.with_suffix(".summary.json").write_text(dumps(summary))
    if args.as_json:
        click.echo(dumps(summary))
    else:
        print_probe_summary(summary, make_console(), wide=args.wide)
        if writer is not None:
            click.echo(f"records: {writer.path}")
            click.echo(f"summary: {writer.path.with_suffix('.summary.json')}")
    _fail_if_nothing_measured(run.records)
    return summary


def _fail_if_nothing_measured(records: list[RequestRecord]) -> None:
    if any(r.ok for r in records):
        return
    first = next((r for r in records if not r.ok), None)
    if first is not None:
        raise_for_result(
            StreamResult(
                ok=False,
                error_kind=first.error_kind,
                error=first.error,
                status=first.status,
                retry_after=first.retry_after,
            )
        )


def probe_options(func: F) -> F:
    """The probe's own options (names follow ``vllm bench serve`` where they mean the same)."""
    opts = [
        click.option(
            "--context-tokens",
            default="0",
            show_default=True,
            help="Comma-separated context sizes in tokens, e.g. 0,8000,32000",
        ),
        click.option(
            "--repeat",
            default=5,
            show_default=True,
            type=click.IntRange(1, 10_000),
            help="Warm requests per context size",
        ),
        click.option("--num-warmups", default=1, show_default=True, type=click.IntRange(0, 1_000)),
        click.option(
            "--max-tokens",
            type=click.IntRange(1, 1_000_000),
            help="Tokens to generate per request (default: model.max_tokens)",
        ),
        click.option(
            "--ab",
            type=click.Choice(["ids"]),
            help="Also send each prompt as text and as token ids (/v1/completions)",
        ),
        click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**63 - 1)),
        click.option(
            "--result-dir",
            type=click.Path(path_type=Path),
            help="Write per-request JSONL records and a summary here",
        ),
        click.option("--metric-percentiles", default="50,90", show_default=True),
        click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON"),
        click.option("--wide", is_flag=True, help="Every column in the table (needs ~140 columns)"),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def run_probe_command(state: CliState, args: ProbeArgs) -> dict[str, Any]:
    if args.max_tokens is not None:
        state.set_flag("model.max_tokens", args.max_tokens)
    opts = ProbeOptions(
        context_tokens=parse_numbers(args.context_tokens, "--context-tokens", int),
        repeat=args.repeat,
        num_warmups=args.num_warmups,
        ab=args.ab,
        seed=args.seed,
        salt=f"{args.seed}-{time.time_ns() % 10**9}",
        gateway_url=args.gateway_url,
        non_ascii=args.non_ascii,
    )
    percentiles = parse_numbers(args.metric_percentiles, "--metric-percentiles", float)
    if any(q > 100 for q in percentiles):
        raise ConfigError(
            f"--metric-percentiles {args.metric_percentiles!r}: each must be between 0 and 100",
            hint="for example 50,90,99",
        )
    return execute_probe(state, opts, args, percentiles)


@click.command()
@endpoint_options
@probe_options
@click.option(
    "--gateway-url",
    help="Also chat through this token-id gateway, alternating with direct chat",
)
@click.option(
    "--non-ascii",
    is_flag=True,
    help="Also send the largest size's chat in non-ASCII letters (the server's slow path)",
)
@click.pass_context
def probe(
    ctx: click.Context,
    context_tokens: str,
    repeat: int,
    num_warmups: int,
    max_tokens: int | None,
    ab: AbMode | None,
    seed: int,
    result_dir: Path | None,
    metric_percentiles: str,
    as_json: bool,
    wide: bool,
    gateway_url: str | None,
    non_ascii: bool,
) -> None:
    """Time requests one at a time and split each TTFT into its parts."""
    args = ProbeArgs(
        context_tokens=context_tokens,
        repeat=repeat,
        num_warmups=num_warmups,
        max_tokens=max_tokens,
        ab=ab,
        seed=seed,
        result_dir=result_dir,
        metric_percentiles=metric_percentiles,
        as_json=as_json,
        wide=wide,
        gateway_url=gateway_url,
        non_ascii=non_ascii,
    )
    run_probe_command(cli_state(ctx), args)
