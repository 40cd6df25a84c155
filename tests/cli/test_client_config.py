"""``ttftscope gateway client-config``: snippets filled from a running gateway, no keys."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from tests.gateway.gatewayserver import GatewayServer
from ttftscope.cli import cli
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.errors import ConfigError


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayServer]:
    up = UpstreamSettings(base_url="http://127.0.0.1:9/v1", mode="text", models=("coder",))
    with GatewayServer(GatewaySettings(upstreams={"u": up})) as gw:
        yield gw


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["gateway", "client-config", *args], env=env)


def test_claude_code_gets_an_env_block_without_v1(gateway: GatewayServer) -> None:
    result = _run("claude-code", "--url", gateway.base_url)
    assert result.exit_code == 0, result.output
    env = json.loads(result.stdout)["env"]  # stdout alone is JSON: the notes go to stderr
    assert result.stderr.startswith("// ~/.claude/settings.json")
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{gateway.port}"
    assert env["ANTHROPIC_MODEL"] == "coder"


def test_codex_gets_a_responses_provider(gateway: GatewayServer) -> None:
    result = _run("codex", "--url", gateway.base_url)
    assert result.exit_code == 0, result.output
    config = tomllib.loads(result.output)
    assert config["model"] == "coder"
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == gateway.base_url and provider["wire_api"] == "responses"


def test_opencode_and_the_sdk_name_the_served_models(gateway: GatewayServer) -> None:
    opencode = json.loads(_run("opencode", "--url", gateway.base_url).stdout)
    provider = next(iter(opencode["provider"].values()))
    assert provider["options"]["baseURL"] == gateway.base_url
    assert list(provider["models"]) == ["coder"]
    sdk = _run("openai-sdk", "--url", gateway.base_url).output
    assert f'base_url="{gateway.base_url}"' in sdk and '"coder"' in sdk


def test_a_key_is_named_never_printed() -> None:
    up = UpstreamSettings(base_url="http://127.0.0.1:9/v1", mode="text", models=("coder",))
    settings = GatewaySettings(upstreams={"u": up}, api_keys_env="GW_KEYS")
    secret = "sk-gateway-secret-123"
    with GatewayServer(settings, env={"GW_KEYS": secret}) as gw:
        env = {"GW_KEYS": secret, "TTFTSCOPE_GATEWAY__API_KEYS_ENV": "GW_KEYS"}
        for kind in ("claude-code", "codex", "opencode", "openai-sdk"):
            result = _run(kind, "--url", gw.base_url, env=env)
            assert result.exit_code == 0, result.output
            assert secret not in result.output and "GW_KEYS" in result.output


def test_no_gateway_is_a_clear_error() -> None:
    result = _run("codex", "--url", "http://127.0.0.1:9/v1")
    assert isinstance(result.exception, ConfigError)  # main() prints it, hint and exit code
    assert "no gateway answers at http://127.0.0.1:9/v1/models" in str(result.exception)
    assert "ttftscope gateway" in str(result.exception)


@pytest.fixture(scope="module")
def keyed() -> Iterator[GatewayServer]:
    up = UpstreamSettings(base_url="http://127.0.0.1:9/v1", mode="text", models=("coder",))
    settings = GatewaySettings(upstreams={"u": up}, api_keys_env="GW_KEYS")
    with GatewayServer(settings, env={"GW_KEYS": "sk-gw-1, sk-gw-2"}) as gw:
        yield gw


def test_a_401_is_told_from_no_answer(keyed: GatewayServer) -> None:
    result = _run("codex", "--url", keyed.base_url, env={"TTFTSCOPE_GATEWAY_KEY": ""})
    assert isinstance(result.exception, ConfigError)
    message = str(result.exception)
    assert f"the gateway at {keyed.base_url} answered 401" in message
    assert "no gateway answers" not in message
    assert "TTFTSCOPE_GATEWAY_KEY" in message
    wrong = _run("codex", "--url", keyed.base_url, env={"TTFTSCOPE_GATEWAY_KEY": "sk-nope"})
    assert isinstance(wrong.exception, ConfigError)
    assert "it refused $TTFTSCOPE_GATEWAY_KEY" in str(wrong.exception)
    assert "sk-nope" not in str(wrong.exception)


def test_the_key_the_snippets_name_is_the_key_it_uses(keyed: GatewayServer) -> None:
    # the user has the variable the snippets read, not the gateway's own key list
    env = {"TTFTSCOPE_GATEWAY_KEY": "sk-gw-2", "GW_KEYS": ""}
    result = _run("opencode", "--url", keyed.base_url, env=env)
    assert result.exit_code == 0, result.output
    provider = next(iter(json.loads(result.stdout)["provider"].values()))
    assert list(provider["models"]) == ["coder"]
    assert provider["options"]["apiKey"] == "{env:TTFTSCOPE_GATEWAY_KEY}"
    assert "sk-gw-2" not in result.output
