"""Two gateway replicas behind Debian's nginx, hashed on Claude Code's session header.

Every turn of a conversation reaches the same replica (its session cache reuses the
conversation's tokens), and killing that replica mid-conversation costs one full encode on
the other: no error, and the same ``input_tokens`` vLLM counts for the request sent to it
directly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e
NGINX = "/usr/sbin/nginx"
SYSTEM = "You are Claude Code, a coding agent. " * 40


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)  # polling a starting server, not waiting for a result
    pytest.fail(f"{what} did not answer at {url}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _gateway(upstream: str, folder: Path, name: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    config = folder / f"{name}.toml"
    config.write_text(
        f"[gateway]\nport = {port}\ncache_mb = 64\n[gateway.upstreams.local]\n"
        f"base_url = {json.dumps(upstream)}\nmodel_dir = {json.dumps(str(model_dir()))}\n"
    )
    cmd = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
    with (folder / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [*cmd, "gateway", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    _wait_http(f"http://127.0.0.1:{port}/health", proc, f"gateway {name}")
    return proc, port


def _nginx_config(folder: Path, port: int, replicas: list[int]) -> Path:
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=60s;" for p in replicas)
    temp = " ".join(
        f"{kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    config = folder / "nginx.conf"
    config.write_text(
        f"daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'nginx-error.log'};\nevents {{}}\nhttp {{\n"
        f"  access_log off;\n  {temp}\n"
        "  upstream gateways {\n    hash $http_x_claude_code_session_id consistent;\n"
        f"{servers}\n  }}\n"
        f"  server {{\n    listen 127.0.0.1:{port};\n    client_max_body_size 64m;\n"
        "    location / {\n      proxy_pass http://gateways;\n      proxy_http_version 1.1;\n"
        '      proxy_set_header Connection "";\n      proxy_buffering off;\n'
        "      proxy_next_upstream error timeout;\n      proxy_read_timeout 600s;\n"
        "    }\n  }\n}\n"
    )
    return config


@pytest.fixture
def replicas(vllm: LocalServer, tmp_path: Path) -> Iterator[tuple[str, dict[int, Any]]]:
    """nginx's base URL and the two gateway processes by port; all stopped after."""
    if not os.access(NGINX, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"{NGINX} is missing: run `bash scripts/install_nginx.sh` first")
        pytest.skip("no nginx (bash scripts/install_nginx.sh installs Debian's)")
    procs: dict[int, Any] = {}
    started: list[subprocess.Popen[bytes]] = []
    try:
        for name in ("a", "b"):
            proc, port = _gateway(vllm.base_url, tmp_path, name)
            procs[port] = proc
            started.append(proc)
        port = _free_port()
        config = _nginx_config(tmp_path, port, list(procs))
        nginx = subprocess.Popen([NGINX, "-c", str(config), "-p", str(tmp_path)])
        started.append(nginx)
        _wait_http(f"http://127.0.0.1:{port}/health", nginx, "nginx")
        yield f"http://127.0.0.1:{port}/v1", procs
    finally:
        for proc in started:
            _stop(proc)
        shutil.rmtree(tmp_path / "proxy", ignore_errors=True)


def _metric(port: int, pattern: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(rf"^{pattern} (\S+)$", text, re.M))


def _served(port: int) -> float:
    """Messages requests a replica has answered (its /metrics)."""
    return _metric(port, r'ttftscope_gateway_requests_total\{[^}]*route="messages"[^}]*\}')


def _reused(port: int) -> float:
    """Prompt tokens a replica took from its session cache."""
    return _metric(port, r"ttftscope_gateway_tokens_reused_total\{[^}]*\}")


def _turn(session: str, n: int, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task of {session}"}]
    for i in range(n):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"{i}"}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"line {i}\n" * 40}
        messages.append({"role": "user", "content": [result]})
    tools = [{"name": "Read", "input_schema": {"properties": {"file_path": {"type": "string"}}}}]
    return {
        "model": model,
        "max_tokens": 2,
        "temperature": 0,
        "system": SYSTEM,
        "tools": tools,
        "messages": messages,
    }


def test_turns_stick_to_a_replica_and_a_dead_one_costs_one_encode(
    vllm: LocalServer, replicas: tuple[str, dict[int, Any]]
) -> None:
    front, procs = replicas
    ports = list(procs)

    def send(session: str, n: int) -> int:
        """One turn through nginx; the replica that answered it."""
        before = {p: _served(p) for p in ports if procs[p].poll() is None}
        body = _turn(session, n, vllm.model)
        headers = {"x-claude-code-session-id": session}
        via = httpx.post(front + "/messages", json=body, headers=headers, timeout=120)
        assert via.status_code == 200, via.text
        direct = httpx.post(vllm.base_url + "/messages", json=body, timeout=120).json()
        assert via.json()["usage"]["input_tokens"] == direct["usage"]["input_tokens"]
        (port,) = [p for p, count in before.items() if _served(p) > count]
        return port

    # nginx's consistent hash places sessions by the replicas' random ports: with one replica
    # home to every session the survivor would cache nothing to share, so sessions are added
    # (a bounded number) until each replica is home to at least one
    first: dict[str, int] = {}
    while set(first.values()) != set(ports) and len(first) < 48:
        for name in [f"session-{len(first) + i}" for i in range(6)]:
            first[name] = send(name, 0)
    sessions = list(first)
    homes = {s: {first[s]} | {send(s, n) for n in (1, 2)} for s in sessions}
    assert len({p for h in homes.values() for p in h}) == 2, homes  # both replicas home
    assert all(len(h) == 1 for h in homes.values()), homes  # every turn to one replica
    by_replica = {p: [s for s in sessions if homes[s] == {p}] for p in ports}
    victim = max(ports, key=lambda p: len(by_replica[p]))
    session = by_replica[victim][0]
    procs[victim].kill()  # mid-conversation, no goodbye
    procs[victim].wait()
    (survivor,) = [p for p in ports if p != victim]
    reused = _reused(survivor)
    assert send(session, 3) == survivor
    moved = _reused(survivor) - reused
    assert send(session, 4) == survivor  # and it stays there, extending that encode
    extended = _reused(survivor) - reused - moved
    # the moved turn found only what the survivor's other sessions share with it (the system
    # prompt and tools): none of its own history was cached there, which the next turn reuses
    assert 0 < moved < extended
