"""End-to-end tests against the real local vLLM (CPU build), started once per session.

The server is installed and its tiny model built by ``scripts/test.sh`` before pytest runs
(both cached between runs on one machine); here it is started and always stopped. Starting it
takes a minute or two, so the fixture says so on the terminal, past pytest's output capture.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator

import pytest

from ttftscope.localserver import process
from ttftscope.localserver.state import LocalServer

# Tool calling as coding agents use it: tool_choice "auto" (vLLM's default when tools are
# given) needs a tool parser; the tiny model's template writes Hermes-style <tool_call> tags.
SERVER_ARGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")


def _tell(config: pytest.Config, line: str) -> None:
    """Print ``line`` on the terminal now, even while pytest captures output."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if capman is None or reporter is None:  # -p no:terminal, or capture off
        print(line, file=sys.__stderr__, flush=True)
        return
    with capman.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(line)


@pytest.fixture(scope="session")
def vllm(pytestconfig: pytest.Config) -> Iterator[LocalServer]:
    _tell(pytestconfig, "starting the local vLLM for the e2e tests (usually 60-130 s)…")
    t0 = time.monotonic()

    def progress(line: str) -> None:
        _tell(pytestconfig, f"[ttftscope] {line}")

    with process.running_server(wait_s=600, progress=progress, extra_args=SERVER_ARGS) as server:
        _tell(
            pytestconfig,
            f"local vLLM ready on {server.base_url} after {time.monotonic() - t0:.0f} s",
        )
        yield server


@pytest.fixture(scope="session")
def tell(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Print a line on the terminal now (for summaries a test wants seen without ``-s``)."""
    return lambda line: _tell(pytestconfig, line)
