"""Consoles for people and for pipes: a terminal wraps to its width, a pipe never wraps.

Piped output is read by programs and pasted into issues; a URL or a table row cut in two at
column 80 helps neither, so a console whose file is not a terminal gets a width no line
reaches and soft wrapping.
"""

from __future__ import annotations

from typing import IO

from rich.console import Console

# Wider than any line we print: rich then never folds text or squeezes tables.
_PIPE_WIDTH = 10_000


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console that wraps on a terminal and never hard-wraps into a pipe or file.

    >>> import io
    >>> c = make_console(file=io.StringIO())
    >>> c.print("x" * 200); c.file.getvalue().count("\\n")
    1
    """
    console = Console(stderr=stderr, file=file, highlight=False)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, file=file, highlight=False, width=_PIPE_WIDTH, soft_wrap=True)
