"""``ttftscope report``: one HTML page and the doctor's diagnosis of probe and bench results.

The composition the layers ask for: the doctor makes the diagnosis of the runs, the report
renders it (page and terminal); neither capability imports the other.
"""

from __future__ import annotations

from pathlib import Path

import click

from ttftscope.cli.console import make_console
from ttftscope.cli.doctor import records_diagnosis
from ttftscope.cli.extras import require_extra
from ttftscope.cli.options import cli_state
from ttftscope.report.compare import comparisons
from ttftscope.report.terminal import (
    print_comparisons,
    print_diagnosis,
    print_request_parts,
    print_verdict,
)
from ttftscope.results.runs import load_runs

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
    self-contained HTML report; print the doctor's diagnosis of them."""
    require_extra("report")
    from ttftscope.report.html import write_report  # plotly loads only for this command

    state = cli_state(ctx)
    runs = load_runs(result_dirs)
    found = records_diagnosis(state, list(result_dirs), runs)
    path = write_report(runs, found, out or default_out(result_dirs[0]))
    console = make_console()
    console.print("[bold]doctor[/] (what these records say):", highlight=False)
    print_verdict(found, runs, console)
    print_diagnosis(found, console, headline=False)
    print_comparisons(comparisons(runs), console)
    print_request_parts(runs, console)
    click.echo(f"report: {path}")
