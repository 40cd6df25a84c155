"""``ping``, ``probe`` and ``demo``: the commands that talk to a server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ttftscope.cli import (
    CliState,
    apply_endpoint_flags,
    cli,
    endpoint_options,
    err_console,
    print_json,
    run_async,
)
from ttftscope.endpoint import Endpoint
from ttftscope.errors import ConfigError
from ttftscope.probe import ProbeOptions, run_probe
from ttftscope.records import ProbeRecord, RecordWriter
from ttftscope.report.terminal import print_probe_summary
from ttftscope.summary import summarize


def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v.strip().replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{what} {text!r} is not a comma-separated list of integers",
                          hint=f"for example {what} 0,8000,32000") from None
    if not values or any(v < 0 for v in values):
        raise ConfigError(f"{what} {text!r} needs at least one value, none negative")
    return values


@cli.command()
@endpoint_options
@click.pass_context
def ping(ctx: click.Context, /, **kwargs: Any) -> None:
    """Send the smallest useful chat request and say what answered."""
    from ttftscope.ping import ping as do_ping

    state = apply_endpoint_flags(ctx, kwargs)
    s = state.load().settings
    ep = Endpoint.from_settings(s, headers=state.headers)
    result = run_async(do_ping(base_url=ep.base_url, api_key=ep.api_key,
                               model=ep.model or None, timeout_s=ep.timeout_s,
                               headers=ep.headers))
    click.echo(f"ok  base_url={result.base_url}  model={result.model_reported}  "
               f"latency={result.latency_ms:.1f} ms")


def _request_logger(state: CliState) -> Any:
    s = state.load().settings
    if not (s.debug.log_request_timing or s.debug.log_token_count):
        return None

    def log(rec: ProbeRecord) -> None:
        parts = [f"#{rec.index} {rec.variant}/{rec.phase} ctx={rec.context_tokens_target}"]
        if s.debug.log_request_timing:
            parts.append(f"ttft={_fmt(rec.client_ttft_ms)}ms server={_fmt(rec.server_ttft_ms)}ms "
                         f"queue={_fmt(rec.queue_ms)}ms prefill={_fmt(rec.prefill_ms)}ms")
        if s.debug.log_token_count:
            parts.append(f"prompt_tokens={rec.prompt_tokens} client_tokens={rec.client_tokens}")
        if not rec.ok:
            parts.append(f"FAILED {rec.error_kind}: {rec.error}")
        err_console.print(" ".join(parts), highlight=False)

    return log


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def _mask(rec: ProbeRecord, obs: Any) -> ProbeRecord:
    """Drop the fields the observability settings say not to record."""
    if not obs.record_ttft:
        rec.client_ttft_ms = rec.wire_ttft_ms = rec.server_ttft_ms = None
    if not obs.record_tokenize_ms:
        rec.tokenize_ms = None
    if not obs.record_queue_ms:
        rec.queue_ms = None
    return rec


def execute_probe(state: CliState, opts: ProbeOptions, *, result_dir: Path | None,
                  as_json: bool, percentiles: list[int]) -> dict[str, Any]:
    """Run a probe with the CLI's settings; print the table (or JSON); return the summary."""
    loaded = state.load()
    s = loaded.settings
    ep = Endpoint.from_settings(s, headers=state.headers)
    if result_dir is None and s.debug.log_request_timing:
        result_dir = Path("ttftscope-results")
    writer = None
    if result_dir is not None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        writer = RecordWriter(result_dir / f"probe-{stamp}.jsonl")
    tok = None
    if s.tokenizer.path is not None:
        from ttftscope.tokenization import load_tokenizer

        tok = load_tokenizer(s.tokenizer.path)
    log = _request_logger(state)

    def on_record(rec: ProbeRecord) -> None:
        _mask(rec, s.observability)
        if log is not None:
            log(rec)

    try:
        run = run_async(run_probe(ep, opts, writer=writer, on_record=on_record,
                                  local_tokenizer=tok))
    finally:
        if writer is not None:
            writer.close()
    summary = summarize(run.records, model=run.model, base_url=ep.base_url,
                        percentiles=percentiles)
    summary["run_id"] = run.run_id
    if writer is not None:
        summary["records_path"] = str(writer.path)
        (writer.path.with_suffix(".summary.json")).write_text(_dumps(summary))
    if as_json:
        print_json(summary)
    else:
        print_probe_summary(summary, Console())
        if writer is not None:
            click.echo(f"records: {writer.path}")
    return summary


def _dumps(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, default=str)


def probe_options(func: Any) -> Any:
    opts = [
        click.option("--context-tokens", default="0", show_default=True,
                     help="Comma-separated context sizes in tokens, e.g. 0,8000,32000"),
        click.option("--repeat", default=5, show_default=True, type=click.IntRange(1),
                     help="Warm requests per context size"),
        click.option("--num-warmups", default=1, show_default=True, type=click.IntRange(0)),
        click.option("--max-tokens", "probe_max_tokens", default=4, show_default=True,
                     type=click.IntRange(1), help="Tokens to generate per request"),
        click.option("--ab", type=click.Choice(["ids"]),
                     help="Also send each prompt as text and as token ids (/v1/completions)"),
        click.option("--seed", default=0, show_default=True, type=int),
        click.option("--result-dir", type=click.Path(path_type=Path),
                     help="Write per-request JSONL records and a summary here"),
        click.option("--metric-percentiles", default="50,90", show_default=True),
        click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON"),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def _probe_opts(kw: dict[str, Any]) -> ProbeOptions:
    return ProbeOptions(context_tokens=_int_list(kw["context_tokens"], "--context-tokens"),
                        repeat=kw["repeat"], num_warmups=kw["num_warmups"],
                        max_tokens=kw["probe_max_tokens"], ab=kw["ab"], seed=kw["seed"],
                        salt=f"{kw['seed']}-{time.time_ns() % 10**9}")


@cli.command()
@endpoint_options
@probe_options
@click.pass_context
def probe(ctx: click.Context, /, **kwargs: Any) -> None:
    """Time requests one at a time and split each TTFT into its parts."""
    state = apply_endpoint_flags(ctx, kwargs)
    execute_probe(state, _probe_opts(kwargs), result_dir=kwargs["result_dir"],
                  as_json=kwargs["as_json"],
                  percentiles=_int_list(kwargs["metric_percentiles"], "--metric-percentiles"))


@cli.command()
@probe_options
@click.option("--keep-server", is_flag=True, help="Leave the local vLLM running afterwards")
@click.pass_context
def demo(ctx: click.Context, /, keep_server: bool, **kwargs: Any) -> None:
    """The main job on a laptop: local vLLM up, probe sweep, breakdown table, vLLM down."""
    from ttftscope import localserver, localserver_build

    state: CliState = ctx.ensure_object(CliState)
    was_running = localserver.status() is not None
    err_console.print("preparing the local vLLM (first run installs ~3.4 GB, then cached)…")
    server = localserver.start()
    try:
        state.flags.update({"api.base_url": server.base_url, "model.default": server.model})
        if state.load().settings.tokenizer.path is None:
            # the served model's own tokenizer, so client-side tokenization is measured too
            state.flags["tokenizer.path"] = str(localserver_build.model_dir())
        state._loaded = None
        opts = _probe_opts(kwargs)
        execute_probe(state, opts, result_dir=kwargs["result_dir"], as_json=kwargs["as_json"],
                      percentiles=_int_list(kwargs["metric_percentiles"],
                                            "--metric-percentiles"))
    finally:
        if not keep_server and not was_running:
            localserver.stop()
            err_console.print("local vLLM stopped")
