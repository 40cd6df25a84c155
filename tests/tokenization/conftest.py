"""Real tokenizer fixtures for every family, built once per machine and shared by all tests.

``tokenizer_paths`` builds (or finds cached) every family in
:data:`ttftscope.tokenization.fixtures.FAMILIES`. A build or verification failure makes every
test using it ERROR, never skip: a silently missing tokenizer would hide real regressions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ttftscope.tokenization.fixtures import FAMILIES, build_all
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer


@pytest.fixture(scope="session")
def tokenizer_paths() -> dict[str, Path]:
    """Family name → folder holding ``tokenizer.json`` (+ ``tokenizer_config.json``)."""
    return build_all(FAMILIES)


@pytest.fixture(scope="session")
def load_family(tokenizer_paths: dict[str, Path]) -> Callable[[str], Tokenizer]:
    """Load a family's fixture once per session (loading o200k/llama3 takes ~1 s)."""
    loaded: dict[str, Tokenizer] = {}

    def load(family: str) -> Tokenizer:
        if family not in loaded:
            loaded[family] = load_tokenizer(tokenizer_paths[family])
        return loaded[family]

    return load
