"""``ttftscope gateway`` start-up, as a user runs it: problems said in one line with a hint
and the documented exit code before "gateway on …", and each upstream's route logged."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx

from tests.faultserver import FaultServer
from tests.tokenizer_fixtures.fixtures import build_all

CLI = [sys.executable, "-c", "from ttftscope.cli import main; main()", "gateway"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def test_a_missing_model_folder_is_a_tokenizer_error_before_anything_starts() -> None:
    port = str(_free_port())
    done = _run(
        "--upstream", "http://127.0.0.1:9/v1", "--model-dir", "/models/qwen3-coder", "--port", port
    )
    assert done.returncode == 14, done.stderr
    assert "/models/qwen3-coder does not exist" in done.stderr and "hint:" in done.stderr
    assert "gateway on" not in done.stderr and "Traceback" not in done.stderr


def test_a_taken_port_is_a_configuration_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = _run("--upstream", "http://127.0.0.1:9/v1", "--mode", "text", "--port", port)
    assert done.returncode == 2, done.stderr
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr and "--port" in done.stderr
    assert "gateway on" not in done.stderr and "Traceback" not in done.stderr


def test_inbound_keys_that_resolve_to_none_are_refused_before_it_says_it_is_up() -> None:
    env = {**os.environ, "TTFTSCOPE_GATEWAY__API_KEYS_ENV": "TTFTSCOPE_TEST_NO_SUCH_KEYS"}
    env.pop("TTFTSCOPE_TEST_NO_SUCH_KEYS", None)
    args = ["--upstream", "http://127.0.0.1:9/v1", "--mode", "text", "--port", str(_free_port())]
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert "TTFTSCOPE_TEST_NO_SUCH_KEYS, which is not set" in done.stderr
    assert "gateway on" not in done.stderr and "Traceback" not in done.stderr


def test_the_start_up_log_names_each_upstreams_route() -> None:
    qwen2_dir = build_all(["qwen2"])["qwen2"]  # a real tokenizer and chat template, offline
    port = _free_port()
    with FaultServer() as upstream:
        args = ["--upstream", upstream.base_url("normal"), "--model-dir", str(qwen2_dir)]
        proc = subprocess.Popen(
            [*CLI, *args, "--port", str(port)], stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)  # polling a starting server, not waiting for a result
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
    assert "gateway on http://127.0.0.1" in err
    assert "upstream default: vLLM 0.32.0, profile 0.32" in err
    assert "ids via chat-ids (probe: prompt_tokens" in err
