"""The local server exports its spans to the trace receiver's port, over OTLP/HTTP, quickly."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.localserver.standin import use_fake
from ttftscope import localstate
from ttftscope.cli.local import local_server
from ttftscope.localserver import process as ls
from ttftscope.localserver import state as st


def test_the_server_env_asks_for_otlp_http_and_a_short_batch_delay() -> None:
    env = ls.server_env({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"  # what we receive
    assert int(env["OTEL_BSP_SCHEDULE_DELAY"]) < 1000  # vLLM's default is 5000 ms
    assert env["OTEL_SERVICE_NAME"] == "vllm"


def test_the_users_own_batch_delay_and_service_name_are_kept() -> None:
    env = ls.server_env({"OTEL_BSP_SCHEDULE_DELAY": "7", "OTEL_SERVICE_NAME": "mine"})
    assert (env["OTEL_BSP_SCHEDULE_DELAY"], env["OTEL_SERVICE_NAME"]) == ("7", "mine")


@pytest.mark.parametrize(("setting", "expected"), [("24318", 24318), ("0", 0)])
def test_cli_start_passes_the_receiver_port_and_records_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch, setting: str, expected: int
) -> None:
    use_fake(monkeypatch)
    fake, seen = ls.server_command, []

    def command(python: Path, model: Path, port: int, extra: Sequence[str] = ()) -> list[str]:
        seen.append(list(extra))
        return fake(python, model, port, extra)

    monkeypatch.setattr(ls, "server_command", command)
    monkeypatch.setenv("TTFTSCOPE_OBSERVABILITY__TRACE_RECEIVER_PORT", setting)
    port = str(st.pick_free_port())
    runner = CliRunner()
    try:
        result = runner.invoke(local_server, ["start", "--port", port, "--wait-s", "20", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output.splitlines()[-1])["trace_port"] == expected
        server = localstate.read_state()
        assert server is not None and server.trace_port == expected
        flag = ["--otlp-traces-endpoint", f"http://127.0.0.1:{expected}/v1/traces"]
        tools = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]  # always served
        assert seen == [tools + (flag if expected else [])]
    finally:
        runner.invoke(local_server, ["stop"])


def test_the_default_receiver_port_is_not_a_collectors() -> None:
    from ttftscope.config.schema import ObservabilitySettings

    assert ObservabilitySettings().trace_receiver_port not in (0, 4317, 4318)
