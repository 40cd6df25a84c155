"""Fixtures of the local server's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ttftscope.localserver.procgroup import stop


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache folder (state file, server log), so no real server is seen or touched."""
    monkeypatch.setenv("TTFTSCOPE_CACHE_DIR", str(tmp_path))
    yield tmp_path
    stop(grace_s=2.0)  # never leave a stand-in running, whatever the test did
