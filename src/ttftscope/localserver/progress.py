"""How the local server's long steps tell a person what they are doing."""

from __future__ import annotations

import sys
from collections.abc import Callable

Progress = Callable[[str], None]


def say_stderr(line: str) -> None:
    """The default :data:`Progress`: one flushed ``[ttftscope]`` line on stderr.

    >>> say_stderr("hello")  # doctest: +SKIP
    """
    print(f"[ttftscope] {line}", file=sys.stderr, flush=True)
