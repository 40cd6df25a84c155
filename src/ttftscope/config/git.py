"""Git hygiene: warn when a config file holding a secret could be published by git."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ttftscope.config.schema import SECRET_KEYS
from ttftscope.config.sources import ConfigFile, file_entries, profile_names


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):  # git absent or hung: the check is optional
        return None


def git_exposure(path: Path) -> str | None:
    """Why a file could leak through git (tracked, or in a work tree and not ignored), else None."""
    folder, name = path.parent, path.name
    tracked = _git(folder, "ls-files", "--error-unmatch", "--", name)
    if tracked is not None and tracked.returncode == 0:
        return "is tracked by git"
    inside = _git(folder, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != "true":
        return None
    ignored = _git(folder, "check-ignore", "-q", "--", name)
    if ignored is not None and ignored.returncode == 1:
        return "is inside a git work tree and not ignored, so it may get committed"
    return None


def git_warnings(files: list[ConfigFile]) -> list[str]:
    warnings: list[str] = []
    for cf in files:
        # Every profile counts, selected or not: the whole file is what git would publish.
        holders = [
            e
            for name in (None, *profile_names(cf))
            for e in file_entries(cf, name)
            if e.key in SECRET_KEYS
        ]
        reason = git_exposure(cf.path) if holders else None
        if reason:
            warnings.append(
                f"{holders[0].source.detail} holds api.api_key and {reason}. Move the key to "
                f"the OPENAI_API_KEY or TTFTSCOPE_API__API_KEY environment variable, or add "
                f"{cf.shown} to .gitignore"
                + (" and run 'git rm --cached' on it." if "tracked" in reason else ".")
            )
    return warnings
