"""Optional extras: what each needs, checked before a command that needs it starts.

``pip install ttftscope`` is the core (the CLI, the library, ``instrument(client)``); the
gateway, the load generator and the HTML report bring their own stacks. A command whose
extra is missing fails with :class:`~ttftscope.errors.MissingExtra` (one message naming
the extra, exit code 18), before it starts anything, instead of an ImportError traceback.

>>> require_extra("report")  # installed here: nothing happens
>>> sorted(EXTRAS)
['bench', 'gateway', 'report', 'trace']
"""

from __future__ import annotations

import importlib.util
from typing import Literal

from ttftscope.errors import MissingExtra

__all__ = ["EXTRAS", "Extra", "require_extra"]

Extra = Literal["gateway", "bench", "report", "trace"]

# extra -> the modules it installs that ttftscope imports (pyproject.toml's
# [project.optional-dependencies], checked against it by tests/cli/test_extras.py)
EXTRAS: dict[Extra, tuple[str, ...]] = {
    "gateway": ("starlette", "uvicorn", "uvloop", "httptools"),
    "bench": ("aiohttp", "uvloop"),
    "report": ("plotly",),
    "trace": (
        "opentelemetry.sdk",
        "opentelemetry.exporter.otlp.proto.http",
        "opentelemetry.proto",
        "google.protobuf",
    ),
}


def require_extra(extra: Extra, *, command: str | None = None) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` can be imported.

    ``command`` names the command in the message (default: the extra's name).
    """
    missing = tuple(m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None)
    if missing:
        raise MissingExtra(extra, missing, command=command)
