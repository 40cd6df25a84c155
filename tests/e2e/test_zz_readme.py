"""The README's "Use" commands, exactly as printed, against the real local vLLM.

The file name sorts last on purpose: the block ends with ``ttftscope local-server stop``,
which stops the session's shared server, so every other e2e test must have run before it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ttftscope.localserver import process
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"


def use_commands() -> list[str]:
    """The command lines of the README's "Use" block, comments dropped."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Use") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the README's Use section has no bash block"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def test_readme_use_block_is_what_we_expect_to_run() -> None:
    commands = use_commands()
    assert commands[0] == "source .venv/bin/activate"
    assert all(c.startswith("ttftscope ") for c in commands[1:])


def test_readme_use_commands_run_as_printed(vllm: LocalServer, tmp_path: Path) -> None:
    # `source .venv/bin/activate` amounts to this interpreter's bin folder first on PATH
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for var in ("OPENAI_BASE_URL", "TTFTSCOPE_API__BASE_URL", "OPENAI_API_KEY"):
        env.pop(var, None)
    for command in use_commands()[1:]:
        proc = subprocess.run(
            shlex.split(command),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        # doctor exits 1 when it finds a warning (to gate a pipeline): a finding, not a failure
        allowed = (0, 1) if command.startswith("ttftscope doctor") else (0,)
        assert proc.returncode in allowed, f"{command}\n{proc.stdout}\n{proc.stderr}"
        if command.startswith("ttftscope doctor"):
            assert "checked: configuration" in proc.stdout and "error" not in proc.stderr
        assert "Traceback" not in proc.stderr, command
        if command == "ttftscope ping":
            assert vllm.base_url in proc.stdout
        if command.startswith("ttftscope config show"):
            assert "local server" in proc.stdout
    assert list((tmp_path / "results").glob("probe-*.jsonl"))
    assert process.status() is None  # the block's last line stopped the server
