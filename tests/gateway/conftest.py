"""A real tokenizer with a chat template (Qwen2's), built offline once per machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tokenizer_fixtures.fixtures import FAMILIES, build_all
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer


@pytest.fixture(scope="session")
def qwen2_dir() -> Path:
    """Folder with Qwen2's tokenizer.json and tokenizer_config.json (chat template)."""
    assert "qwen2" in FAMILIES
    return build_all(["qwen2"])["qwen2"]


@pytest.fixture(scope="session")
def qwen2(qwen2_dir: Path) -> Tokenizer:
    return load_tokenizer(qwen2_dir)
