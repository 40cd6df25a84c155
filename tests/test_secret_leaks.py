"""A distinctive key, placed every way a user can place one, never shows up anywhere.

Every command runs as a user would run it (a subprocess), against a server that echoes the
presented credentials in its 401 body; stdout, stderr and every file written are searched
for the key, its URL-encoded form and its base64 forms.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.faultserver import FaultServer

KEY = "sk-canary-7f3a9c0e5b1d4a2e8c6f"
CLI = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
BASIC = base64.b64encode(f"user:{KEY}".encode()).decode()
FORMS = [KEY, quote(KEY, safe=""), BASIC, base64.b64encode(KEY.encode()).decode()]


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _placements(srv: FaultServer) -> dict[str, tuple[dict[str, str], list[str], str]]:
    """name -> (environment, extra flags, config.toml text)."""
    normal, echo = srv.base_url("normal"), srv.base_url("unauthorized")
    cfg = f'[api]\nbase_url = "{echo}"\n'
    return {
        "env OPENAI_API_KEY": ({"OPENAI_API_KEY": KEY}, ["--base-url", echo], ""),
        "env TTFTSCOPE_API__API_KEY": ({"TTFTSCOPE_API__API_KEY": KEY}, [], cfg),
        "config api_key": ({}, [], cfg + f'api_key = "{KEY}"\n'),
        "profile api_key": ({}, ["--profile", "p"], cfg + f'[profiles.p.api]\napi_key = "{KEY}"\n'),
        "bearer header": ({}, ["--base-url", echo, "--header", f"Authorization: Bearer {KEY}"], ""),
        "basic header": ({}, ["--base-url", echo, "--header", f"Authorization: Basic {BASIC}"], ""),
        "api-key header": ({}, ["--base-url", echo, "--header", f"api-key: {KEY}"], ""),
        "userinfo in base url": ({}, ["--base-url", normal.replace("//", f"//u:{KEY}@")], ""),
        "query in base url": ({}, ["--base-url", f"{normal}?api_key={KEY}"], ""),
        "userinfo via OPENAI_BASE_URL": (
            {"OPENAI_BASE_URL": normal.replace("//", f"//u:{KEY}@")},
            [],
            "",
        ),
        "key in metrics url": ({}, ["--metrics-url", f"http://127.0.0.1:9/m?k={KEY}"], ""),
    }


COMMANDS = [
    ["ping"],
    ["probe", "--repeat", "1", "--num-warmups", "0", "--result-dir", "out"],
    ["probe", "--repeat", "1", "--num-warmups", "0", "--json", "--result-dir", "out"],
    ["config", "show"],
    ["config", "show", "--json"],
    ["gateway", "check"],
]


def _leaks(text: str) -> list[str]:
    return [form for form in FORMS if form in text]


@pytest.mark.parametrize("placement", list(_placements(FaultServer()).keys()))
def test_no_command_shows_the_key(server: FaultServer, tmp_path: Path, placement: str) -> None:
    env, flags, config = _placements(server)[placement]
    if config:
        (tmp_path / "config.toml").write_text(config)
    base_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env}
    for command in COMMANDS:
        args = (
            [*command, *flags]
            if command[0] != "config"
            else command + (["--profile", "p"] if "--profile" in flags else [])
        )
        proc = subprocess.run(
            [*CLI, *args],
            cwd=tmp_path,
            env=base_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        shown = proc.stdout + proc.stderr
        assert "Traceback" not in shown, (placement, args, shown)
        assert _leaks(shown) == [], (placement, args, shown)
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "config.toml":
            assert _leaks(path.read_text(errors="replace")) == [], (placement, path)
