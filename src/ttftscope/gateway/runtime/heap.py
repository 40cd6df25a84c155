"""The C heap under the gateway: fewer malloc arenas, and freed memory handed back.

A cold 100K-token encode allocates tens of MB in HF's Rust code and in Python lists, on a
worker thread, and frees them when it is done. glibc gives each thread that contends for the
heap an arena of its own (up to 8 per core) and keeps what was freed in it, so under churn
RSS grew ~350 MB above the session cache (issue 20), ~170 MB less with two arenas. The
gateway's process therefore uses two arenas (:func:`limit_arenas`, called by ``serve``
before any worker starts) and returns freed pages to the system after each long job
(:func:`trim`, on the worker thread: ctypes releases the GIL for the call). Both do nothing
where the C library is not glibc.

>>> trim() in (True, False)
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

_M_ARENA_MAX = -8  # glibc's mallopt parameter


@functools.cache
def _glibc() -> Any | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.malloc_trim  # noqa: B018  (glibc only: AttributeError elsewhere)
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(count: int) -> bool:
    """At most ``count`` malloc arenas from now on; whether the C library took it."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, count))


def trim() -> bool:
    """Return the heap's free pages to the system; whether any were returned."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
