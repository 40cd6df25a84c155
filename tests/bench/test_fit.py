"""A bench whose planned sessions outgrow the server's ``max_model_len``: scaled down and
said so (one line), unless the sizes were the user's own (``--scale``, ``--context-tokens``).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.bench.conftest import FAST, endpoint, run
from tests.faultserver import FaultOptions, FaultServer
from ttftscope.bench.hooks import Hooks
from ttftscope.bench.options import ContextSizes
from ttftscope.bench.plan.preparation import check_fits
from ttftscope.bench.plan.workload import plan_workload
from ttftscope.cli.options import CliState
from ttftscope.errors import ConfigError

# 2,000-token contexts and 3 turns of the traces' appends each (median 655 tokens): too long
# for a 1,500-token server at scale 1
BIG = dataclasses.replace(
    FAST, context_tokens=ContextSizes("list", (2_000,)), sessions=4, num_prompts=12
)
cli_bench = importlib.import_module("ttftscope.cli.bench")  # the package exports the command


def refused(scale: float, limit: int) -> bool:
    """Whether bench's own check (the exit 2 of before) refuses the plan at ``scale``."""
    try:
        check_fits(plan_workload(dataclasses.replace(BIG, scale=scale), 1), limit, 4, "m")
    except ConfigError:
        return True
    return False


@pytest.fixture
def small_server() -> Iterator[FaultServer]:
    with FaultServer(FaultOptions(max_model_len=1_500)) as srv:
        yield srv


def test_a_workload_too_long_is_scaled_to_fit_and_said_once(
    small_server: FaultServer, tmp_path: Path
) -> None:
    notes: list[str] = []
    done = run(endpoint(small_server), BIG, tmp_path, Hooks(on_note=notes.append))
    scale = done.summary["scale"]
    assert refused(1.0, 1_500) and not refused(scale, 1_500) and 0 < scale < 1
    assert notes == [f"scaled to --scale {scale:g} to fit max_model_len 1,500"]
    assert done.summary["context_tokens"] == str(round(2_000 * scale))
    assert done.summary["completed"] == 12


def test_a_workload_that_fits_is_sent_as_planned(tmp_path: Path) -> None:
    notes: list[str] = []
    with FaultServer(FaultOptions(max_model_len=100_000)) as srv:
        done = run(endpoint(srv), BIG, tmp_path, Hooks(on_note=notes.append))
    assert (done.summary["scale"], notes) == (1.0, [])


def test_the_users_own_sizes_are_refused_not_scaled(
    small_server: FaultServer, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="above tiny-llama's max_model_len of 1,500"):
        run(endpoint(small_server), BIG, tmp_path, fit_scale=False)


@pytest.mark.parametrize(
    ("flags", "fit"),
    [([], True), (["--scale", "1"], False), (["--context-tokens", "86000-123000"], False)],
)
def test_the_cli_fits_only_sizes_left_at_their_defaults(
    flags: list[str], fit: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(
        cli_bench, "execute_bench", lambda _s, args: seen.append(args.options().fit_scale)
    )
    result = CliRunner().invoke(cli_bench.bench, flags, obj=CliState())
    assert result.exit_code == 0, result.output
    assert seen == [fit]
