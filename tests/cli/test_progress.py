"""Probe progress at 80 columns: the description gives way, the count and the clock never do."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from ttftscope.cli.progress import RequestProgress, fit_description

LONG_STAGE = "context 32000 tokens: chat requests with token ids, warm prefix cache"


def _terminal(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=True, color_system=None), buf


@pytest.mark.parametrize("width", [80, 60])
def test_a_long_stage_leaves_the_count_and_the_clock_whole(width: int) -> None:
    console, buf = _terminal(width)
    with RequestProgress(120, console) as progress:
        progress.stage(LONG_STAGE)
        progress.done = 56
        assert progress._bar is not None and progress._task is not None
        progress._bar.update(progress._task, completed=56)
        progress._bar.refresh()
    frames = [f for f in re.split(r"\r|\n", buf.getvalue()) if "56/120" in f]
    assert frames, buf.getvalue()
    frame = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", frames[-1]).rstrip()
    assert re.search(r" 56/120 \d:\d\d:\d\d$", frame), frame
    assert len(frame) <= width and "…" in frame


def test_fit_description_keeps_what_fits() -> None:
    assert fit_description("probe: starting", 80, 20, 7) == "probe: starting"
    cut = fit_description("probe: " + LONG_STAGE, 80, 20, 7)
    assert cut.endswith("…") and len(cut) == 80 - 20 - 7 - 7 - 4
