"""End-to-end tests against the real local vLLM (CPU build), started once per session.

The server is installed and its tiny model built by ``scripts/test.sh`` before pytest runs
(both cached between runs on one machine); here it is started and always stopped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ttftscope.localserver import process
from ttftscope.localserver.state import LocalServer


@pytest.fixture(scope="session")
def vllm() -> Iterator[LocalServer]:
    with process.running_server(wait_s=600) as server:
        yield server
