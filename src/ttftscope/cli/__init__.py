"""The ``ttftscope`` command line: thin; parse, call the library, print.

Owns: the click group, the entry point and the mapping of errors to messages and exit codes.
May import everything below it; nothing imports it. Each command module exports its command
or group and is added here explicitly. Errors derived from
:class:`~ttftscope.errors.TtftscopeError` become one readable message (API keys redacted) and
the error's own exit code, never a traceback.

>>> sorted(cli.commands)  # doctest: +NORMALIZE_WHITESPACE
['bench', 'config', 'demo', 'doctor', 'gateway', 'local-server', 'ping', 'prefix-diff',
 'probe', 'report']
"""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from ttftscope.cli.bench import bench
from ttftscope.cli.config import config
from ttftscope.cli.demo import demo
from ttftscope.cli.doctor import doctor
from ttftscope.cli.gateway import gateway
from ttftscope.cli.local import local_server
from ttftscope.cli.options import CliState, config_options
from ttftscope.cli.ping import ping
from ttftscope.cli.prefix_diff import prefix_diff
from ttftscope.cli.probe import probe
from ttftscope.cli.report import report
from ttftscope.config.redact import redact_text
from ttftscope.errors import FailureKind, ServerUnreachable, TtftscopeError
from ttftscope.localserver import process

__all__ = ["cli", "main"]


@click.group()
@config_options
@click.version_option(package_name="ttftscope")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Where does your time to first token go? Measure it, then remove the biggest part."""
    ctx.ensure_object(CliState)


cli.add_command(config)
cli.add_command(local_server)
cli.add_command(ping)
cli.add_command(probe)
cli.add_command(demo)
cli.add_command(gateway)
cli.add_command(report)
cli.add_command(bench)
cli.add_command(prefix_diff)
cli.add_command(doctor)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the CLI and maps errors to messages and exit codes."""
    state = CliState()
    try:
        # without standalone mode click returns ctx.exit()'s code instead of exiting
        code = cli.main(args=argv, standalone_mode=False, obj=state)
        if isinstance(code, int) and code:
            sys.exit(code)
    except TtftscopeError as exc:
        message = escape(redact_text(str(_local_server_hint(exc, state)), state.known_secrets()))
        state.err.print(f"[red]error:[/red] {message}", highlight=False)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file or folder we were told to use: say which and why
        where = f" ({exc.filename})" if exc.filename else ""
        state.err.print(
            f"[red]error:[/red] {escape(exc.strerror or str(exc))}{escape(where)}"
            "\n  hint: check the path and its permissions",
            highlight=False,
        )
        sys.exit(1)
    except click.exceptions.Abort:
        state.err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def _local_server_hint(exc: TtftscopeError, state: CliState) -> TtftscopeError:
    """A refused connection's hint names the running local server, or how to start one."""
    if not (isinstance(exc, ServerUnreachable) and exc.kind is FailureKind.CONNECTION_REFUSED):
        return exc
    local = process.status()
    if local is None:
        return exc.with_hint(
            "is a server listening at that address? For a local one, run "
            "`ttftscope local-server start` and leave the base URL unset"
        )
    loaded = state.loaded
    origin = "" if loaded is None else f" (api.base_url is from {loaded.sources['api.base_url']})"
    return exc.with_hint(
        f"a local vLLM runs at {local.base_url}, not there{origin}: pass --base-url "
        f"{local.base_url}, or leave the base URL unset to use it"
    )
