"""``ttftscope config show``: print every effective setting with its source.

The command does not load settings itself: the main CLI stores an object with a
``load() -> LoadedSettings`` method on ``ctx.obj`` (it knows ``--config``, ``--profile`` and
the flags), and this group calls it. A :class:`~ttftscope.errors.ConfigError` propagates to
the main CLI, which turns it into a message and exit code 2.

Example wiring::

    @click.group()
    @click.pass_context
    def main(ctx: click.Context) -> None:
        ctx.obj = MyState(...)          # has .load() -> LoadedSettings
    main.add_command(config)
"""

from __future__ import annotations

import json
from typing import Protocol, cast

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ttftscope.cli.console import make_console
from ttftscope.config.loader import LoadedSettings

__all__ = ["config"]


class SettingsLoader(Protocol):
    """What ``config show`` needs on ``ctx.obj``."""

    def load(self) -> LoadedSettings: ...


def _loader(ctx: click.Context) -> SettingsLoader:
    obj = ctx.find_object(object)
    if obj is None or not callable(getattr(obj, "load", None)):
        raise click.UsageError(
            "internal: the parent command must put an object with .load() on ctx.obj"
        )
    return cast(SettingsLoader, obj)


def render_table(loaded: LoadedSettings, console: Console) -> None:
    """Print the settings as a table, or as key/value lines where a table would split values.

    A URL cut into ``http://127.0.0.1:80`` / ``00/v1`` cannot be copied, so on a narrow
    terminal each setting gets its own line with the source beside or under it.
    """
    caption = "files: " + (", ".join(str(p) for p in loaded.files) or "none found")
    if loaded.profile:
        caption += f"  profile: {loaded.profile}"
    rows = loaded.table()
    if not _table_fits(rows, console.width):
        _render_lines(rows, caption, console)
        return
    table = Table(title="ttftscope settings", caption=Text(caption), show_lines=False)
    table.add_column("key", style="cyan", no_wrap=True)
    table.add_column("value", no_wrap=True)
    table.add_column("source", style="dim", no_wrap=True)
    for key, value, source in rows:
        # Text, not str: sources like "[profiles.fast]" would be eaten as rich markup.
        table.add_row(Text(key), Text(value), Text(source))
    console.print(table)


# A rich table's borders and padding: 4 vertical rules plus one space each side of 3 cells.
_TABLE_CHROME = 10


def _table_fits(rows: list[tuple[str, str, str]], width: int) -> bool:
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    return sum(widths) + _TABLE_CHROME <= width


def _render_lines(rows: list[tuple[str, str, str]], caption: str, console: Console) -> None:
    console.print(Text("ttftscope settings", style="italic"))
    for key, value, source in rows:
        line = Text.assemble((key, "cyan"), " = ", value)
        tail = Text(f"  ({source})", style="dim")
        if len(line) + len(tail) <= console.width:
            console.print(line + tail, soft_wrap=True)
        else:
            console.print(line, soft_wrap=True)
            console.print(Text(f"    from {source}", style="dim"), soft_wrap=True)
    console.print(Text(caption, style="dim"), soft_wrap=True)


@click.group(name="config")
def config() -> None:
    """Inspect the layered configuration.

    >>> sorted(config.commands)
    ['show']
    """


@config.command(name="show")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {key, value, source}.")
@click.pass_context
def show(ctx: click.Context, as_json: bool) -> None:
    """Show every effective setting, its value (API keys redacted) and where it came from."""
    loaded = _loader(ctx).load()  # the loader reports warnings, once per run
    if as_json:
        click.echo(json.dumps(loaded.rows(), indent=2))
    else:
        render_table(loaded, make_console())
