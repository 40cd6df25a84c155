"""The CLI maps every error to a message and exit code; no tracebacks, no secrets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.faultserver import FaultServer


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(
        [sys.executable, "-c", "from ttftscope.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=60,
        check=False,
    )


def test_unknown_key_is_a_clear_error_with_exit_code_2(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[api]\nbase_urll = "http://x/v1"\n')
    proc = _run("ping", cwd=tmp_path)
    assert proc.returncode == 2
    assert "config.toml:2" in proc.stderr and "[api]" in proc.stderr
    assert "did you mean 'base_url'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ping_success_prints_base_url_model_and_latency(tmp_path: Path) -> None:
    with FaultServer() as srv:
        proc = _run("ping", "--base-url", srv.base_url("normal"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert srv.base_url("normal") in proc.stdout
    assert "model=tiny-llama" in proc.stdout and "latency=" in proc.stdout


def test_ping_unauthorized_never_echoes_the_key(tmp_path: Path) -> None:
    key = "sk-test-0123456789abcdef0123"
    with FaultServer() as srv:
        proc = _run(
            "ping",
            "--base-url",
            srv.base_url("unauthorized"),
            cwd=tmp_path,
            env={"OPENAI_API_KEY": key},
        )
    assert proc.returncode == 7
    assert key not in proc.stderr + proc.stdout
    assert "api_key" in proc.stderr or "API_KEY" in proc.stderr


def test_connection_refused_names_the_remedy(tmp_path: Path) -> None:
    proc = _run("ping", "--base-url", "http://127.0.0.1:9/v1", cwd=tmp_path)
    assert proc.returncode == 4
    assert "local-server start" in proc.stderr


def test_bad_context_tokens_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run("probe", "--context-tokens", "8k", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--context-tokens" in proc.stderr and "0,8000,32000" in proc.stderr


def test_bad_header_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run("ping", "--header", "no-colon", cwd=tmp_path)
    assert proc.returncode == 2 and "Name: value" in proc.stderr


def test_profile_and_config_work_after_the_command_too(tmp_path: Path) -> None:
    cfg = tmp_path / "elsewhere.toml"
    with FaultServer() as srv:
        cfg.write_text(
            f'[api]\nbase_url = "http://127.0.0.1:9/v1"\n'
            f'[profiles.fault.api]\nbase_url = "{srv.base_url("normal")}"\n'
        )
        proc = _run("ping", "--config", str(cfg), "--profile", "fault", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert srv.base_url("normal") in proc.stdout
    missing = _run("ping", "--config", str(cfg), "--profile", "nope", cwd=tmp_path)
    assert missing.returncode == 2 and "defined profiles: fault" in missing.stderr
