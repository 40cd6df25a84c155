"""``config show``: table and JSON, keys redacted, settings obtained from the parent's ctx.obj."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ttftscope.cli.config import config
from ttftscope.config.loader import LoadedSettings, load_settings
from ttftscope.config.schema import KEYS
from ttftscope.errors import ConfigError

SECRET = "sk-proj-abcdefghijklmnop0123"


@dataclass
class State:
    loader: Callable[[], LoadedSettings]

    def load(self) -> LoadedSettings:
        return self.loader()


def make_cli(loader: Callable[[], LoadedSettings]) -> click.Group:
    @click.group()
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        ctx.obj = State(loader)

    cli.add_command(config)
    return cli


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "config.toml").write_text(
        f'[api]\nbase_url = "http://h:9/v1"\napi_key = "{SECRET}"\n'
        "[profiles.fast.model]\nmax_tokens = 2\n"
    )
    return tmp_path


def loader_for(proj: Path, **kw: object) -> Callable[[], LoadedSettings]:
    env = {"XDG_CONFIG_HOME": str(proj / "xdg"), "TTFTSCOPE_MODEL__DEFAULT": "tiny"}
    return lambda: load_settings(cwd=proj, env=env, profile="fast", flags={"api.max_retries": 4})


def test_show_table(proj: Path) -> None:
    result = CliRunner().invoke(
        make_cli(loader_for(proj)), ["config", "show"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert SECRET not in result.output
    for key in KEYS:
        assert key in out
    assert "sk-…0123" in out and "config.toml:3" in out
    assert "env TTFTSCOPE_MODEL__DEFAULT" in out and "flag --max-retries" in out
    assert "config.toml:5 [profiles.fast]" in out and "profile: fast" in out


def test_show_json(proj: Path) -> None:
    result = CliRunner().invoke(make_cli(loader_for(proj)), ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    rows = json.loads(result.stdout)
    assert [r["key"] for r in rows] == KEYS
    by_key = {r["key"]: r for r in rows}
    assert by_key["api.api_key"] == {
        "key": "api.api_key",
        "value": "sk-…0123",
        "source": "config.toml:3",
    }
    assert by_key["api.max_retries"] == {
        "key": "api.max_retries",
        "value": 4,
        "source": "flag --max-retries",
    }
    assert by_key["model.max_tokens"]["source"] == "config.toml:5 [profiles.fast]"
    assert by_key["debug.log_token_count"]["value"] is False


def test_warnings_are_printed_once_to_stderr(tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "config.toml").write_text(f'[api]\napi_key = "{SECRET}"\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ttftscope.cli import main; main()",
            "config",
            "show",
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning:") == 1 and "config.toml" in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout
    assert json.loads(proc.stdout)  # stdout stays pure JSON


def test_config_error_propagates_to_the_main_cli(proj: Path) -> None:
    def broken() -> LoadedSettings:
        raise ConfigError("config.toml:1: bad", hint="fix it")

    result = CliRunner().invoke(make_cli(broken), ["config", "show"])
    assert isinstance(result.exception, ConfigError)


def test_show_without_loader_is_a_usage_error() -> None:
    @click.group()
    def cli() -> None:
        pass

    cli.add_command(config)
    result = CliRunner().invoke(cli, ["config", "show"])
    assert result.exit_code == 2
    assert ".load()" in result.output


@pytest.mark.parametrize("width", [80, 60])
def test_narrow_terminal_gets_whole_values_on_key_value_lines(proj: Path, width: int) -> None:
    import io

    from rich.console import Console

    from ttftscope.cli.config import render_table

    long_url = "http://inference-gateway.internal.example.com:8000/v1"
    (proj / "config.toml").write_text(
        f'[api]\nbase_url = "{long_url}"\n[profiles.fast.model]\nmax_tokens = 2\n'
    )
    buf = io.StringIO()
    render_table(loader_for(proj)(), Console(file=buf, width=width, color_system=None))
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    at = lines.index(f"api.base_url = {long_url}")
    assert lines[at + 1] == "    from config.toml:2"
    assert "api.max_retries = 4  (flag --max-retries)" in lines
    assert "api.metrics_url = http://inference-gateway.internal.example.com:8000/metrics" in lines
    # a path is never split; every other line fits the terminal
    assert any(
        line.startswith("files: ") and "config.toml  profile: fast" in line for line in lines
    )
    too_long = [line for line in lines if len(line) > width and not line.startswith("files: ")]
    # only a value wider than the terminal by itself may overflow, and then alone on its line
    assert all(line.count(" = ") == 1 and "(" not in line for line in too_long), too_long


def test_wide_terminal_keeps_the_table(proj: Path) -> None:
    import io

    from rich.console import Console

    from ttftscope.cli.config import render_table

    buf = io.StringIO()
    render_table(loader_for(proj)(), Console(file=buf, width=200, color_system=None))
    assert "┃ key" in buf.getvalue()
