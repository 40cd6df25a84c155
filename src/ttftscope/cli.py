"""The ``ttftscope`` command line: thin; parse, call the library, print.

Every command reads one configuration (files, profile, environment, flags) through
:class:`CliState`. Errors derived from :class:`~ttftscope.errors.TtftscopeError` become one
readable message (API keys redacted) and the error's own exit code, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from ttftscope.cli_config import config_group
from ttftscope.cli_local import local_server
from ttftscope.config import LoadedSettings, load_settings, redact_text
from ttftscope.errors import ConfigError, TtftscopeError

F = TypeVar("F", bound=Callable[..., Any])
err_console = Console(stderr=True)
# Secrets seen while loading settings, so an error message can never echo them.
_SECRETS: list[str] = []


@dataclass
class CliState:
    """What every command needs to load settings; ``config show`` calls :meth:`load`."""

    config_path: Path | None = None
    profile: str | None = None
    flags: dict[str, object] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    _loaded: LoadedSettings | None = None

    def load(self) -> LoadedSettings:
        if self._loaded is None:
            self._loaded = load_settings(config_path=self.config_path, profile=self.profile,
                                         flags=self.flags)
            _SECRETS.extend(self._loaded.secrets())
            for warning in self._loaded.warnings:
                err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}",
                                  highlight=False)
        return self._loaded


_FLAG_KEYS = {"base_url": "api.base_url", "metrics_url": "api.metrics_url",
              "model": "model.default", "timeout": "api.timeout_seconds",
              "tokenizer": "tokenizer.path"}


def endpoint_options(func: F) -> F:
    """``--config --profile --base-url --model --timeout --metrics-url --tokenizer --header``."""
    opts = [
        click.option("--config", "config_path", type=click.Path(path_type=Path),
                     help="Config file (same as before the command)"),
        click.option("--profile", help="Named profile from the config file"),
        click.option("--base-url", help="OpenAI-compatible base URL, e.g. http://host:8000/v1"),
        click.option("--model", help="Model name (default: config, else the server's first)"),
        click.option("--timeout", type=float, help="Request timeout in seconds"),
        click.option("--metrics-url", help="Prometheus /metrics URL (default: from base URL)"),
        click.option("--tokenizer", help="Local tokenizer (tokenizer.json, model dir, .tiktoken)"),
        click.option("--header", "headers", multiple=True,
                     help="Extra request header 'Name: value' (repeatable)"),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def apply_endpoint_flags(ctx: click.Context, kwargs: dict[str, Any]) -> CliState:
    """Move endpoint flags out of ``kwargs`` into the state's flag layer."""
    state: CliState = ctx.ensure_object(CliState)
    state.config_path = kwargs.pop("config_path", None) or state.config_path
    state.profile = kwargs.pop("profile", None) or state.profile
    for name, key in _FLAG_KEYS.items():
        value = kwargs.pop(name, None)
        if value is not None:
            state.flags[key] = value
    for raw in kwargs.pop("headers", ()) or ():
        name, sep, value = raw.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {raw!r} is not 'Name: value'",
                              hint="write it as --header 'X-Team: infra'")
        state.headers[name.strip()] = value.strip()
    state._loaded = None
    return state


@click.group()
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (config.toml or settings.json); default: search cwd, then "
                   "the user config dir")
@click.option("--profile", help="Named profile from the config file ([profiles.NAME])")
@click.version_option(package_name="ttftscope")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, profile: str | None) -> None:
    """Where does your time to first token go? Measure it, then remove the biggest part."""
    ctx.obj = CliState(config_path=config_path, profile=profile)


cli.add_command(config_group())
cli.add_command(local_server)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the CLI and maps errors to messages and exit codes."""
    # imported here so command modules can import this one for shared helpers
    from ttftscope import cli_commands  # noqa: F401

    try:
        cli.main(args=argv, standalone_mode=False)
    except TtftscopeError as exc:
        secrets = _known_secrets()
        message = escape(redact_text(str(exc), secrets))
        err_console.print(f"[red]error:[/red] {message}", highlight=False)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file or folder we were told to use: say which and why
        where = f" ({exc.filename})" if exc.filename else ""
        err_console.print(f"[red]error:[/red] {escape(exc.strerror or str(exc))}{escape(where)}"
                          "\n  hint: check the path and its permissions", highlight=False)
        sys.exit(1)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def _known_secrets() -> list[str]:
    import os

    return _SECRETS + [v for k, v in os.environ.items() if k.endswith("API_KEY") and v]


def run_async(coro: Any) -> Any:
    """Run a coroutine from a synchronous click command."""
    return asyncio.run(coro)


def dumps(data: Any) -> str:
    """JSON for people and machines: indented, anything unusual as its string form."""
    return json.dumps(data, indent=2, default=str)
