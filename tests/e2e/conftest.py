"""End-to-end tests against the real local vLLM (CPU build), started once per session.

The server is installed and its tiny model built by ``scripts/test.sh`` before pytest runs
(both cached between runs on one machine); here it is started and always stopped. Starting it
takes a minute or two, so the fixture says so on the terminal, past pytest's output capture.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.procs import stop_group
from ttftscope.config.schema import DEFAULT_TRACE_RECEIVER_PORT
from ttftscope.localserver import process
from ttftscope.localserver.install import ensure_vllm_venv, venv_python
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.serving import default_args
from ttftscope.localserver.state import HOST
from ttftscope.localstate import LocalServer

# What `ttftscope local-server start` serves with by default (one definition: tool calling as
# coding agents use it, spans to the trace receiver's default port, where the tests that read
# them run the receiver: tests/e2e/test_traces.py). A running server started with other flags
# is never adopted (same_args): the fixture fails, saying which flags it has.
SERVER_ARGS = tuple(default_args(DEFAULT_TRACE_RECEIVER_PORT))
# A second, deliberately unhealthy server: fewer sequences than bench sessions (requests
# wait) and no prefix cache. Started only by the tests that ask for it.
CONSTRAINED_ARGS = ("--max-num-seqs", "2", "--no-enable-prefix-caching")


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
    _tell(pytestconfig, "starting the local vLLM for the e2e tests (usually 1-4 min)…")
    t0 = time.monotonic()

    def progress(line: str) -> None:
        _tell(pytestconfig, f"[ttftscope] {line}")

    with process.running_server(
        wait_s=600, progress=progress, extra_args=SERVER_ARGS, same_args=True
    ) as server:
        _tell(
            pytestconfig,
            f"local vLLM ready on {server.base_url} after {time.monotonic() - t0:.0f} s",
        )
        yield server


@pytest.fixture(scope="session")
def tell(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Print a line on the terminal now (for summaries a test wants seen without ``-s``)."""
    return lambda line: _tell(pytestconfig, line)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def constrained_vllm(
    pytestconfig: pytest.Config, vllm: LocalServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    """A second vLLM with ``CONSTRAINED_ARGS``, beside the shared one, always stopped."""
    port = _free_port()
    cmd = process.server_command(
        venv_python(ensure_vllm_venv()), model_dir(), port, CONSTRAINED_ARGS
    )
    log = tmp_path_factory.mktemp("constrained") / "server.log"
    _tell(pytestconfig, f"starting a constrained vLLM ({' '.join(CONSTRAINED_ARGS)})…")
    with log.open("wb") as fh:
        fh.write(("$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=process.server_env(),
            start_new_session=True,
            cwd=str(log.parent),
        )
    server = LocalServer(
        base_url=f"http://{HOST}:{port}/v1",
        port=port,
        pid=proc.pid,
        model=vllm.model,
        log_path=str(log),
        started_at=time.time(),
    )
    try:
        deadline = time.monotonic() + 600
        while not process.healthy(server.root_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = Path(log).read_text(errors="replace")[-2000:]
                pytest.fail(f"the constrained vLLM did not start:\n{tail}")
            time.sleep(1.0)
        _tell(pytestconfig, f"constrained vLLM ready on {server.base_url}")
        yield server
    finally:
        stop_group(proc)
