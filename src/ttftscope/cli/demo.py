"""``ttftscope demo``: the main job on one machine, end to end.

Local vLLM up; a probe sweep (chat, text vs ids, direct vs the token-id gateway) with its
breakdown table; two short agent-session benches straight to vLLM and through the gateway,
alternating: chat completions, then Claude Code-shaped sessions on the Anthropic Messages
API (``/v1/messages``); one HTML report of all runs with the doctor's reading of them; vLLM
down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ttftscope.cli.bench import BenchArgs, execute_bench
from ttftscope.cli.extras import Extra, require_extra
from ttftscope.cli.options import CliState, cli_state
from ttftscope.cli.probe import ProbeArgs, probe_options, run_probe_command
from ttftscope.cli.report import report
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.localserver import process, procgroup
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.serving import default_args
from ttftscope.localserver.traces import SCHEDULE_DELAY_MS
from ttftscope.localstate import trace_port_for
from ttftscope.probe.experiments import AbMode
from ttftscope.tracing.emit import open_emitter

__all__ = ["demo"]

NEXT_STEPS = """\
Next, with the CLI on your PATH (source .venv/bin/activate):
  ttftscope local-server start   # a local vLLM that stays up, on :8000
  ttftscope ping                 # finds the running local server by itself
  ttftscope probe --context-tokens 0,8000 --repeat 3 --ab ids
  ttftscope gateway              # every agent API in, token ids to vLLM, :8100
  ttftscope bench --target direct --target gateway=http://127.0.0.1:8100/v1
  ttftscope doctor               # the bottleneck and its remedy
  ttftscope config show          # every setting and where it came from
  ttftscope local-server stop"""


@contextlib.contextmanager
def _local_gateway(state: CliState, upstream: str, trace_port: int | None) -> Iterator[str]:
    """A token-id gateway in front of the local server, for the demo's A/B. With the
    server's spans read on ``trace_port``, the gateway's go there too: a request through
    it is one trace, client → gateway → vLLM, in its record."""
    from ttftscope.gateway.serve import BackgroundGateway

    settings = GatewaySettings(
        upstreams={"local": UpstreamSettings(base_url=upstream, model_dir=model_dir())}
    )
    emitter = None
    if trace_port is not None:  # short batches, as vLLM's: the runs wait for these spans
        url = f"http://127.0.0.1:{trace_port}"
        emitter = open_emitter(url, command="demo", schedule_delay_ms=SCHEDULE_DELAY_MS)
    try:
        with BackgroundGateway(settings, emitter=emitter) as gw:
            state.err.print(
                f"token-id gateway on {gw.base_url} (ids via {gw.gateway.upstreams[0].api})"
            )
            yield gw.base_url
    finally:
        if emitter is not None:
            emitter.shutdown()


# short answers: the tiny CPU model takes ~15 ms a token, and TTFT is what is measured
DEMO_MAX_TOKENS = 16


def _bench_args(result_dir: Path, gateway_url: str, seed: int, api: str) -> BenchArgs:
    """4 agent sessions of ``api`` at 5% of agent context sizes, direct and through the
    gateway."""
    return BenchArgs(
        sessions=4,
        context_tokens="86000-123000",
        scale=0.05,
        think_time_s=0.1,
        shared_system_prompt=False,
        replay=None,
        seed=seed,
        max_tokens=DEMO_MAX_TOKENS,
        max_concurrency=None,
        request_rate="inf",
        num_prompts=16,
        duration=300.0,
        num_warmups=1,
        metric_percentiles="50,90,99",
        result_dir=result_dir / time.strftime(f"bench-{api}-%Y%m%d-%H%M%S"),
        label=f"demo {api}",
        extra_body=None,
        target=("direct", f"gateway={gateway_url}"),
        honour_retry_after=False,
        shard="1/1",
        run_id=None,
        as_json=False,
        api=api,
    )


def _probe_and_bench(
    state: CliState, args: ProbeArgs, url: str | None, bench: bool
) -> tuple[dict[str, Any], list[Path]]:
    summary = run_probe_command(state, dataclasses.replace(args, gateway_url=url))
    if url is None or not bench:
        return summary, []
    result_dir = args.result_dir or Path("ttftscope-results")
    dirs = []
    for api, what in (("chat", "chat completions"), ("messages", "Claude Code's Messages API")):
        state.err.print(f"agent sessions on {what}, direct and through the gateway (bench)…")
        run = execute_bench(state, _bench_args(result_dir, url, args.seed, api))
        dirs.append(run.files.summary.parent)
    return summary, dirs


def _extras_used(no_gateway: bool, no_bench: bool, as_json: bool) -> list[Extra]:
    """The extras this run needs: checked before vLLM starts, not after minutes of it.

    >>> _extras_used(no_gateway=False, no_bench=True, as_json=True)
    ['gateway']
    """
    used: dict[Extra, bool] = {
        "gateway": not no_gateway,
        "bench": not (no_gateway or no_bench),
        "report": not as_json,
    }
    return [extra for extra, needed in used.items() if needed]


@click.command()
@probe_options
@click.option("--keep-server", is_flag=True, help="Leave the local vLLM running afterwards")
@click.option("--no-gateway", is_flag=True, help="Skip the direct-vs-gateway comparison")
@click.option("--no-bench", is_flag=True, help="Skip the agent-session bench")
@click.pass_context
def demo(
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
    keep_server: bool,
    no_gateway: bool,
    no_bench: bool,
) -> None:
    """The main job on a laptop: local vLLM up, probe sweep, bench, report, doctor, vLLM down."""
    state = cli_state(ctx)
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
    )
    for extra in _extras_used(no_gateway, no_bench, as_json):
        require_extra(extra, command="demo")
    state.err.print("preparing the local vLLM (the first run installs ~3.4 GB, then cached)")
    serving = default_args(state.load().settings.observability.trace_receiver_port)
    started = process.ensure_started(extra_args=serving)
    server = started.server
    try:
        state.set_flag("api.base_url", server.base_url)
        state.set_flag("model.default", server.model)
        if state.load().settings.tokenizer.path is None:
            # the served model's own tokenizer, so client-side tokenization is measured too
            # (labelled ttftscope's own in the records: shown, never a finding about a client)
            state.set_flag("tokenizer.path", str(model_dir()))
        if no_gateway:
            summary, bench_dirs = _probe_and_bench(state, args, None, False)
        else:
            trace_port = trace_port_for(state.load().settings, server.base_url)
            with _local_gateway(state, server.base_url, trace_port) as url:
                summary, bench_dirs = _probe_and_bench(state, args, url, not no_bench)
    finally:
        if started.launched and not keep_server:
            procgroup.stop(only_pid=server.pid)
            state.err.print("local vLLM stopped")
    if as_json or "records_path" not in summary:
        return
    paths = [Path(summary["records_path"]), *bench_dirs]
    ctx.invoke(report, result_dirs=tuple(paths), out=None)  # the page and the doctor's reading
    click.echo(NEXT_STEPS)
