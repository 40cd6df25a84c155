"""Fixtures shared by every test folder (``tests`` is a package: helpers import as
``tests.faultserver``)."""

from __future__ import annotations

from pathlib import Path

import pytest


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


def pytest_configure(config: pytest.Config) -> None:
    from tests.slowtests import register

    register(config)
