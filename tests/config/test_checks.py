"""Wire values are checked when settings load: clear errors that never quote a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftscope.client.endpoint import Endpoint
from ttftscope.config.loader import load_settings
from ttftscope.errors import ConfigError

KEY = "sk-leak-canary-0123456789abcdef"


def _load(env: dict[str, str], proj: Path, **flags: object) -> None:
    load_settings(env=env, cwd=proj, flags=flags)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:99999/v1", "port"),
        ("http://127.0.0.1:0/v1", "port"),
        ("http://127.0.0.1:abc/v1", "port"),
        ("http://user:%zz/x@h/v1", "user name or password"),
        (f"http://user:{KEY}@h:8000/v1", "user name or password"),
        (f"http://h:8000/v1?api_key={KEY}", "query string"),
        ("http://h:8000/v1#frag", "query string or fragment"),
        ("http://exa mple/v1", "spaces"),
        ("http://h/v1\r\n", "control characters"),
        ("http://café.example/v1", "non-ASCII"),
        ("ftp://h/v1", "http://"),
        ("http:///v1", "name a host"),
    ],
)
def test_bad_urls_fail_at_load_without_quoting_secrets(
    env: dict[str, str], proj: Path, url: str, reason: str
) -> None:
    for key in ("api.base_url", "api.metrics_url"):
        with pytest.raises(ConfigError) as info:
            _load(env, proj, **{key: url})
        assert reason in str(info.value)
        assert KEY not in str(info.value)


def test_userinfo_in_base_url_points_to_api_key(env: dict[str, str], proj: Path) -> None:
    with pytest.raises(ConfigError, match=r"api\.api_key") as info:
        _load({**env, "OPENAI_BASE_URL": f"http://u:{KEY}@h/v1"}, proj)
    assert KEY not in str(info.value) and "***@h" in str(info.value)


@pytest.mark.parametrize("key", [KEY + "\n", KEY + "\r", "\t" + KEY, KEY + "…", "sk café key"])
def test_keys_that_cannot_be_sent_are_refused_without_echo(
    env: dict[str, str], proj: Path, key: str
) -> None:
    with pytest.raises(ConfigError, match=r"api\.api_key") as info:
        _load({**env, "OPENAI_API_KEY": key}, proj)
    assert key.strip() not in str(info.value)
    assert "HTTP header" in str(info.value)


def test_tilde_user_that_does_not_exist_is_a_config_error(env: dict[str, str], proj: Path) -> None:
    with pytest.raises(ConfigError, match="~user that does not exist"):
        _load(env, proj, **{"tokenizer.path": "~nosuchuser-ttftscope/x"})
    (proj / "config.toml").write_text('[tokenizer]\npath = "~nosuchuser-ttftscope/x"\n')
    with pytest.raises(ConfigError, match=r"config\.toml"):
        _load(env, proj)


@pytest.mark.parametrize(
    "text",
    ["[model]\nmax_tokens = " + "9" * 5000 + "\n", "[api]\nx = " + "[" * 5000 + "]" * 5000],
)
def test_absurd_toml_is_a_config_error(env: dict[str, str], proj: Path, text: str) -> None:
    (proj / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"config\.toml"):
        _load(env, proj)


@pytest.mark.parametrize("text", ['{"model": {"max_tokens": ' + "9" * 5000 + "}}", "[" * 100_000])
def test_absurd_json_is_a_config_error(env: dict[str, str], proj: Path, text: str) -> None:
    (proj / "settings.json").write_text(text)
    with pytest.raises(ConfigError, match=r"settings\.json"):
        _load(env, proj)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("api.timeout_seconds", "nan"), ("api.timeout_seconds", "inf"), ("model.temperature", "nan")],
)
def test_non_finite_numbers_are_refused(
    env: dict[str, str], proj: Path, flag: str, value: str
) -> None:
    with pytest.raises(ConfigError, match=flag):
        _load(env, proj, **{flag: value})


def test_credentials_go_to_metrics_only_on_the_api_origin(env: dict[str, str], proj: Path) -> None:
    env = {**env, "OPENAI_API_KEY": KEY}
    other = load_settings(
        env=env,
        cwd=proj,
        flags={"api.base_url": "http://h:1/v1", "api.metrics_url": "http://p:9/m"},
    ).settings
    assert Endpoint.from_settings(other, headers={"X-Team": "a"}).scrape_headers() == {}
    same = load_settings(env=env, cwd=proj, flags={"api.base_url": "http://h:1/v1"}).settings
    assert Endpoint.from_settings(same).scrape_headers() == {"Authorization": f"Bearer {KEY}"}
    opted = load_settings(
        env={**env, "TTFTSCOPE_API__METRICS_AUTH": "true"},
        cwd=proj,
        flags={"api.base_url": "http://h:1/v1", "api.metrics_url": "http://p:9/m"},
    ).settings
    assert Endpoint.from_settings(opted).scrape_headers() == {"Authorization": f"Bearer {KEY}"}
