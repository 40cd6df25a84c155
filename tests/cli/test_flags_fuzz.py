"""Fuzz the command line: any flags end in success or in our error, never a traceback.

Commands run in-process through click's test runner against the in-process test server, so
hundreds of argument lists take seconds. ``main`` maps our errors to exit codes; here the
same classes are accepted and anything else fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.faultserver import FaultServer
from ttftscope.cli import cli
from ttftscope.cli.options import CliState
from ttftscope.errors import TtftscopeError

_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "nan",
            "inf",
            "-1",
            "0",
            "1e309",
            "9" * 400,
            "99999999999999999999999",
            "0,8000",
            "50,90,99",
            "X-Team: café",
            "X-Team: a\r\nb",
            "Authorization: Bearer k",
            ":",
            "a:b",
            "http://127.0.0.1:99999/v1",
            "http://127.0.0.1:abc/v1",
            "http://u:%zz/x@h/v1",
            "~nosuchuser/x",
            "\u2028",
            "\x00",
        ]
    ),
)
_FLAGS = st.sampled_from(
    [
        "--model",
        "--timeout",
        "--metrics-url",
        "--tokenizer",
        "--header",
        "--context-tokens",
        "--metric-percentiles",
        "--repeat",
        "--num-warmups",
        "--max-tokens",
        "--seed",
        "--ab",
        "--base-url",
    ]
)


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    command=st.sampled_from(["ping", "probe", "config show"]),
    pairs=st.lists(st.tuples(_FLAGS, _TEXT), max_size=4),
    scenario=st.sampled_from(["normal", "rate_limited", "html", "unauthorized", "drop"]),
)
def test_any_flags_end_in_success_or_our_error(
    server: FaultServer, command: str, pairs: list[tuple[str, str]], scenario: str
) -> None:
    if command == "config show":  # it takes no endpoint flags; they come from files and env
        # an environment cannot hold NUL; everything else a user can put there goes in
        env = {
            f"TTFTSCOPE_{f[2:].upper().replace('-', '_')}": v.replace("\x00", "") for f, v in pairs
        }
        result = CliRunner().invoke(cli, ["config", "show"], obj=CliState(), env=env)
        _check(["config", "show", repr(env)], result.exception)
        return
    args = [command, "--base-url", server.base_url(scenario)]
    if command == "probe":
        args += ["--repeat", "1", "--num-warmups", "0"]
    for flag, value in pairs:
        args += [flag, value]
    result = CliRunner().invoke(cli, args, obj=CliState(), catch_exceptions=True)
    _check(args, result.exception)


def _check(args: list[str], exc: BaseException | None) -> None:
    if exc is None or isinstance(exc, SystemExit):
        return
    allowed = (TtftscopeError, click.ClickException, click.exceptions.Exit)
    assert isinstance(exc, allowed), f"{args!r} raised {type(exc).__name__}: {exc}"
