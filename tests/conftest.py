"""Shared test set-up: make ``tests/`` importable so subfolders can use ``faultserver``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


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
