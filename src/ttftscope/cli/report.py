"""``ttftscope report``: one HTML page and a verdict from probe and bench result directories."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from ttftscope.cli.console import make_console
from ttftscope.cli.extras import require_extra
from ttftscope.cli.options import cli_state
from ttftscope.report.results import load_runs
from ttftscope.report.terminal import print_verdict
from ttftscope.report.verdict import verdict

__all__ = ["default_out", "report"]


def default_out(first: Path) -> Path:
    """``report.html`` in the first result directory (beside a records file given instead).

    >>> default_out(Path("results/probe-1.jsonl")), default_out(Path("results"))
    (PosixPath('results/report.html'), PosixPath('results/report.html'))
    """
    folder = first.parent if first.suffix == ".jsonl" else first
    return folder / "report.html"


@click.command()
@click.argument(
    "result_dirs", metavar="RESULT_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="HTML file to write [default: RESULT_DIR/report.html of the first]",
)
@click.pass_context
def report(ctx: click.Context, result_dirs: tuple[Path, ...], out: Path | None) -> None:
    """Read probe and bench result directories (shards of one run are merged) and write one
    self-contained HTML report; print its verdict."""
    require_extra("report")
    from ttftscope.report.html import write_report  # plotly loads only for this command

    state = cli_state(ctx)
    runs = load_runs(result_dirs)
    found = verdict(runs)
    path = write_report(runs, found, out or default_out(result_dirs[0]))
    print_verdict(found, make_console())
    for run in runs:
        for note in run.notes:
            state.err.print(f"[dim]note:[/dim] {escape(note)}", highlight=False)
    click.echo(f"report: {path}")
