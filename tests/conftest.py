"""Fixtures shared by every test folder (``tests`` is a package: helpers import as
``tests.faultserver``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# No test here is about speed: hypothesis's per-example deadline (200 ms by default) would only
# measure how loaded the machine is, and fail tests on a busy 2-core runner.
settings.register_profile("ttftscope", deadline=None)
settings.load_profile("ttftscope")


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """An empty project directory used as cwd."""
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A hermetic environment whose user config dir is empty (and inside tmp_path)."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
