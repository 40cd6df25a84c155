"""The vLLM install's steps: each runs logged, with progress, and fails with the log's tail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ttftscope.errors import LocalServerError
from ttftscope.localserver import install


def test_run_logged_failure_raises_with_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    log.write_text("install started\n", encoding="utf-8")
    script = (
        "import sys; [print(f'noise {i}') for i in range(30)];"
        "print('ERROR: No matching distribution found for torch==9', file=sys.stderr); "
        "raise SystemExit(4)"
    )
    lines: list[str] = []
    with pytest.raises(LocalServerError) as info:
        install.run_logged(
            [sys.executable, "-c", script],
            log,
            "installing torch (step 1/3)",
            "a hint",
            lines.append,
        )
    message = info.value.message
    assert message.startswith(f"installing torch (step 1/3) failed (exit 4); full log: {log}\n")
    assert message.endswith("ERROR: No matching distribution found for torch==9")
    assert "noise 29" in message and "noise 5" not in message  # the tail only
    assert info.value.hint == "a hint"
    assert lines[0] == "installing torch (step 1/3) …"
    assert lines[-1].startswith("installing torch (step 1/3): failed after ")


def test_run_logged_success_appends_command_and_output(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    log.write_text("install started\n", encoding="utf-8")
    lines: list[str] = []
    install.run_logged([sys.executable, "-c", "print('ok')"], log, "checking", "h", lines.append)
    assert log.read_text(encoding="utf-8") == (
        f"install started\n\n$ {sys.executable} -c print('ok')\nok\n"
    )
    assert lines == ["checking …", "checking: done in 0 s"]
