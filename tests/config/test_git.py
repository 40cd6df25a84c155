"""An api_key in a config file that git could publish produces a warning (not an error)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ttftscope.config.loader import load_settings

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

KEY_TOML = '[api]\nbase_url = "http://127.0.0.1:8000/v1"\napi_key = "sk-test-0123456789abcdef"\n'


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=30)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    return path


def warnings_for(cwd: Path, tmp_path: Path) -> list[str]:
    return load_settings(cwd=cwd, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}).warnings


def test_untracked_not_ignored_file_warns(repo: Path, tmp_path: Path) -> None:
    (repo / "config.toml").write_text(KEY_TOML)
    [warning] = warnings_for(repo, tmp_path)
    assert warning.startswith("config.toml:3 holds api.api_key")
    assert "not ignored" in warning
    assert "OPENAI_API_KEY" in warning and ".gitignore" in warning
    assert "sk-test-0123456789abcdef" not in warning


def test_ignored_file_is_fine(repo: Path, tmp_path: Path) -> None:
    (repo / "config.toml").write_text(KEY_TOML)
    (repo / ".gitignore").write_text("config.toml\n")
    assert warnings_for(repo, tmp_path) == []


def test_tracked_file_warns_even_if_ignored_later(repo: Path, tmp_path: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    (sub / "settings.json").write_text('{"api": {"api_key": "sk-test-0123456789abcdef"}}')
    git(repo, "add", "sub/settings.json")
    (repo / ".gitignore").write_text("settings.json\n")
    [warning] = warnings_for(sub, tmp_path)
    assert warning.startswith("settings.json:1 holds api.api_key and is tracked by git")
    assert "git rm --cached" in warning


def test_key_in_profile_also_warns(repo: Path, tmp_path: Path) -> None:
    (repo / "config.toml").write_text('[profiles.prod.api]\napi_key = "sk-x-0123456789abcdef"\n')
    [warning] = warnings_for(repo, tmp_path)
    assert warning.startswith("config.toml:2 [profiles.prod] holds api.api_key")


def test_no_key_no_warning(repo: Path, tmp_path: Path) -> None:
    (repo / "config.toml").write_text('[api]\nbase_url = "http://h:1/v1"\n')
    assert warnings_for(repo, tmp_path) == []


def test_outside_any_repo_no_warning(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.toml").write_text(KEY_TOML)
    ceiling = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in ceiling.items():
            mp.setenv(name, value)
        assert warnings_for(plain, tmp_path) == []


def test_git_absent_is_skipped_quietly(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "config.toml").write_text(KEY_TOML)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    loaded = load_settings(cwd=repo, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert loaded.warnings == []
    assert loaded.settings.api.api_key is not None
