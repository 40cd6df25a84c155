"""What every command shares: the settings state on ``ctx.obj`` and the endpoint options.

Options do not reach command functions as keyword arguments: each endpoint option's callback
stores its value in the :class:`CliState` on ``ctx.obj`` (``expose_value=False``), so every
command reads one configuration (files, profile, environment, flags) the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from ttftscope.cli.console import make_console
from ttftscope.config.checks import check_header
from ttftscope.config.loader import LoadedSettings, load_settings
from ttftscope.config.redact import header_secrets
from ttftscope.config.schema import ObservabilitySettings
from ttftscope.errors import ConfigError
from ttftscope.localserver import process

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


@dataclass
class CliState:
    """Config path, profile, flag layer and headers of one CLI run; loads settings once.

    >>> state = CliState()
    >>> state.set_flag("api.base_url", "http://h:1/v1")
    >>> state.flags
    {'api.base_url': 'http://h:1/v1'}
    """

    config_path: Path | None = None
    profile: str | None = None
    flags: dict[str, object] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
    err: Console = field(default_factory=lambda: make_console(stderr=True))
    _loaded: LoadedSettings | None = None

    def load(self) -> LoadedSettings:
        """The effective settings (loaded once; warnings printed once).

        When nothing configures a base URL and a local server runs, its URL and model are
        used, with "local server" as their source.
        """
        if self._loaded is None:
            loaded = self._load_layers()
            self._loaded = loaded
            self.secrets.extend(loaded.secrets())
            for warning in loaded.warnings:
                self.err.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
        return self._loaded

    def _load_layers(self) -> LoadedSettings:
        loaded = load_settings(config_path=self.config_path, profile=self.profile, flags=self.flags)
        if loaded.sources["api.base_url"].kind != "default":
            return loaded
        local = process.status()
        if local is None:
            return loaded
        return load_settings(
            config_path=self.config_path,
            profile=self.profile,
            flags=self.flags,
            discovered={"api.base_url": local.base_url, "model.default": local.model},
            discovered_from=f"local server (pid {local.pid}; ttftscope local-server status)",
        )

    @property
    def loaded(self) -> LoadedSettings | None:
        """The settings if already loaded (error reporting must not load them again)."""
        return self._loaded

    def set_flag(self, key: str, value: object) -> None:
        """Put ``value`` in the flag layer under the dotted ``key``; settings reload."""
        self.flags[key] = value
        self._loaded = None

    def known_secrets(self) -> list[str]:
        """Every secret an error message must not echo: loaded keys and ``*API_KEY`` vars."""
        env = [v for k, v in os.environ.items() if k.endswith("API_KEY") and v]
        return self.secrets + env


def cli_state(ctx: click.Context) -> CliState:
    """The run's :class:`CliState` (created when a test invokes a command directly)."""
    return ctx.ensure_object(CliState)


def _store_flag(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if value is not None:
            cli_state(ctx).set_flag(key, value)
        return value

    return store


def _store_config(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        cli_state(ctx).config_path = value


def _store_profile(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        cli_state(ctx).profile = value


def parse_header(raw: str) -> tuple[str, str]:
    """``"Name: value"`` as ``(name, value)``; a clear error otherwise.

    >>> parse_header("X-Team:  infra ")
    ('X-Team', 'infra')
    """
    name, sep, value = raw.partition(":")
    if not sep or not name.strip():
        shown = repr(raw) if not sep else "with an empty name"  # no ':' means no value to hide
        raise ConfigError(
            f"--header {shown} is not 'Name: value'", hint="write it as --header 'X-Team: infra'"
        )
    try:
        return check_header(name.strip(), value.strip())
    except ValueError as exc:
        raise ConfigError(
            f"--header {name.strip()!r}: {exc}",
            hint="HTTP headers carry ASCII only; encode other text first (e.g. percent-encode)",
        ) from None


def _store_headers(ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
    state = cli_state(ctx)
    state.headers.update(parse_header(raw) for raw in value)
    state.secrets.extend(header_secrets(state.headers))


def config_options(func: F) -> F:
    """``--config`` and ``--profile``, accepted after the command as well as before it."""
    func = click.option(
        "--profile",
        callback=_store_profile,
        expose_value=False,
        help="Named profile from the config file",
    )(func)
    return click.option(
        "--config",
        type=click.Path(path_type=Path),
        callback=_store_config,
        expose_value=False,
        help="Config file (config.toml or settings.json); default: ./, then ~/.config/ttftscope/",
    )(func)


def endpoint_options(func: F) -> F:
    """``--config --profile --base-url --model --timeout --metrics-url --tokenizer --header``."""
    opts = [
        click.option(
            "--base-url",
            callback=_store_flag("api.base_url"),
            expose_value=False,
            help="OpenAI-compatible base URL, e.g. http://host:8000/v1",
        ),
        click.option(
            "--model",
            callback=_store_flag("model.default"),
            expose_value=False,
            help="Model name (default: config, else the server's first)",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(0, 86_400, min_open=True),
            callback=_store_flag("api.timeout_seconds"),
            expose_value=False,
            help="Request timeout in seconds",
        ),
        click.option(
            "--metrics-url",
            callback=_store_flag("api.metrics_url"),
            expose_value=False,
            help="Prometheus /metrics URL (default: from base URL)",
        ),
        click.option(
            "--tokenizer",
            callback=_store_flag("tokenizer.path"),
            expose_value=False,
            help="Local tokenizer (tokenizer.json, model dir, .tiktoken)",
        ),
        click.option(
            "--header",
            multiple=True,
            callback=_store_headers,
            expose_value=False,
            help="Extra request header 'Name: value' (repeatable)",
        ),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return config_options(func)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from a synchronous click command."""
    return asyncio.run(coro)


def dumps(data: object) -> str:
    """JSON for people and machines: indented, anything unusual as its string form.

    >>> print(dumps({"a": 1}))
    {
      "a": 1
    }
    """
    return json.dumps(data, indent=2, default=str)


def excluded_fields(obs: ObservabilitySettings) -> set[str]:
    """Record fields the observability settings say not to write.

    >>> sorted(excluded_fields(ObservabilitySettings(record_queue_ms=False)))
    ['queue_ms']
    """
    out: set[str] = set()
    if not obs.record_ttft:
        out |= {"client_ttft_ms", "wire_ttft_ms", "server_ttft_ms"}
    if not obs.record_tokenize_ms:
        out.add("tokenize_ms")
    if not obs.record_queue_ms:
        out.add("queue_ms")
    return out
