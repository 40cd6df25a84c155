"""``ttftscope local-server install|start|stop|status``: the real local vLLM for demos and tests.

Thin: parse, call :mod:`ttftscope.localserver`, print. Errors exit with their ``exit_code``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from ttftscope.cli.options import cli_state
from ttftscope.localserver import process, procgroup
from ttftscope.localserver.install import ensure_vllm_venv
from ttftscope.localserver.model import ensure_tiny_model
from ttftscope.localserver.serving import default_args
from ttftscope.localstate import LocalServer

__all__ = ["local_server"]


def _show(server: LocalServer, as_json: bool, *, state: str) -> None:
    if as_json:
        click.echo(json.dumps({"state": state, **asdict(server)}))
    else:
        click.echo(
            f"{state}: {server.base_url} (pid {server.pid})\nmodel: {server.model}\n"
            f"log: {server.log_path}"
            + (f"\nspans to: 127.0.0.1:{server.trace_port}" if server.trace_port else "")
        )


@click.group("local-server")
def local_server() -> None:
    """A real local vLLM (CPU build) serving a tiny model with a real 100K tokenizer."""


@local_server.command()
def install() -> None:
    """Install vLLM into its own cached venv and build the tiny model (once, 3-8 minutes)."""
    venv = ensure_vllm_venv()
    model = ensure_tiny_model(venv)
    click.echo(f"venv: {venv}\nmodel: {model}")


@local_server.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port on 127.0.0.1 (default: 8000 when free, else a free one).",
)
@click.option(
    "--wait-s",
    type=click.FloatRange(1, 7200),
    default=300.0,
    show_default=True,
    help="Seconds to wait for /health.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the server as one JSON object.")
@click.argument("extra_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def start(
    ctx: click.Context, port: int | None, wait_s: float, as_json: bool, extra_args: tuple[str, ...]
) -> None:
    """Start (or reuse) the server; arguments after the options go to vLLM.

    vLLM serves tool calling as coding agents use it (--enable-auto-tool-choice
    --tool-call-parser hermes) and exports one span per request to ttftscope's trace
    receiver ([observability] trace_receiver_port; 0: no spans), which probe and bench read.

    Example: ttftscope local-server start -- --enable-scale-out
    """
    trace_port = cli_state(ctx).load().settings.observability.trace_receiver_port
    args = (*default_args(trace_port), *extra_args)  # a flag of the user's own comes last, wins
    _show(process.start(port, extra_args=args, wait_s=wait_s), as_json, state="running")


@local_server.command()
def stop() -> None:
    """Stop the server and every process it started."""
    click.echo("stopped" if procgroup.stop() else "no local server was running")


@local_server.command()
@click.option("--json", "as_json", is_flag=True, help="Print the server as one JSON object.")
def status(as_json: bool) -> None:
    """Say whether the local server is running and where; exit 1 when none answers."""
    server = process.status()
    if server is None:
        if as_json:
            click.echo(json.dumps({"state": "stopped"}))
        click.echo("stopped: no local server is running (ttftscope local-server start)", err=True)
        sys.exit(1)
    _show(server, as_json, state="running")
