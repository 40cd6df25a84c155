"""Every configuration mistake becomes a ConfigError that says where and what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ttftscope.config.loader import load_settings
from ttftscope.errors import ConfigError


def error(proj: Path, env: dict[str, str], files: dict[str, str], **kw: Any) -> ConfigError:
    for name, text in files.items():
        (proj / name).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=proj, env=env, **kw)
    assert info.value.exit_code == 2
    return info.value


def test_malformed_toml_names_file_line_column(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"config.toml": '[api]\nbase_url = "x"\ntimeout = = 3\n'})
    assert str(err).startswith("config.toml:3:11: malformed TOML")
    assert err.hint and "fix the syntax" in err.hint


def test_unterminated_toml_string(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"config.toml": '[api]\nbase_url = "http://x'})
    assert str(err).startswith("config.toml:2: malformed TOML: Unterminated string")


def test_malformed_json_names_file_line_column(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"settings.json": '{\n  "api": {"max_retries": 1,}\n}\n'})
    assert str(err).startswith("settings.json:2:28: malformed JSON")
    assert err.hint and "trailing commas" in err.hint


def test_json_top_level_must_be_object(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"settings.json": "[1, 2]"})
    assert "settings.json:1: the top level must be a JSON object" in str(err)


@pytest.mark.parametrize(
    ("name", "text", "where", "suggestion"),
    [
        (
            "config.toml",
            "[api]\n\nbase_ur = 'x'\n",
            "config.toml:3: unknown key 'base_ur' in [api]",
            "did you mean 'base_url'?",
        ),
        (
            "config.toml",
            "[profiles.fast.model]\nmax_token = 3\n",
            "config.toml:2: unknown key 'max_token' in [profiles.fast.model]",
            "did you mean 'max_tokens'?",
        ),
        (
            "config.toml",
            "[observabilty]\nrecord_ttft = true\n",
            "config.toml:1: unknown section 'observabilty' in the top level",
            "did you mean 'observability'?",
        ),
        (
            "config.toml",
            "[profiles.fast.modle]\nmax_tokens = 3\n",
            "config.toml:1: unknown section 'modle' in [profiles.fast]",
            "did you mean 'model'?",
        ),
        (
            "settings.json",
            '{"api": {"timeout_second": 3}}',
            "settings.json:1: unknown key 'timeout_second' in [api]",
            "did you mean 'timeout_seconds'?",
        ),
        (
            "settings.json",
            '{\n"profiles": {"a": {"debug": {"log_tokens": true}}}}',
            "settings.json:2: unknown key 'log_tokens' in [profiles.a.debug]",
            "did you mean 'log_token_count'?",
        ),
    ],
)
def test_unknown_keys_with_did_you_mean(
    proj: Path, env: dict[str, str], name: str, text: str, where: str, suggestion: str
) -> None:
    err = error(proj, env, {name: text})
    assert str(err).startswith(where)
    assert err.hint is not None and err.hint.startswith(suggestion)


def test_unknown_key_without_close_match_lists_known(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"config.toml": "[debug]\nzzz = 1\n"})
    assert err.hint and "log_request_timing" in err.hint and "did you mean" not in err.hint


def test_unknown_key_in_unselected_profile_is_still_an_error(
    proj: Path, env: dict[str, str]
) -> None:
    err = error(proj, env, {"config.toml": "[profiles.other.api]\nbase = 'x'\n"})
    assert "config.toml:2: unknown key 'base' in [profiles.other.api]" in str(err)


def test_dotted_key_in_json_says_nest_it(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"settings.json": '{"api.base_url": "http://x:1/v1"}'})
    assert "unknown section 'api.base_url'" in str(err)
    assert err.hint and "nest it" in err.hint


def test_section_must_be_a_table(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"config.toml": "api = 3\n"})
    assert str(err).startswith("config.toml:1: 'api' must be a table")


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        (
            '[api]\ntimeout_seconds = "fast"\n',
            "config.toml:2",
            "a number of seconds above 0 and at most 86400",
        ),
        ("[api]\nmax_retries = -1\n", "config.toml:2", "a whole number from 0 to 100"),
        ("[model]\n\nmax_tokens = 1.5\n", "config.toml:3", "a whole number from 1 to 1000000"),
        ('[debug]\nlog_token_count = "maybe"\n', "config.toml:2", "true or false"),
        ("[api]\nbase_url = 8000\n", "config.toml:2", "a URL string"),
        (
            '[profiles.p.model]\ntemperature = "hot"\n',
            "config.toml:2 [profiles.p]",
            "a number from 0 to 100",
        ),
    ],
)
def test_wrong_types_name_file_line_and_expected_type(
    proj: Path, env: dict[str, str], text: str, where: str, expected: str
) -> None:
    err = error(proj, env, {"config.toml": text}, profile="p" if "profiles" in text else None)
    assert str(err).startswith(where + ": ")
    assert f"expected {expected}" in str(err)
    assert err.hint == "fix the value in the file"


def test_wrong_type_message_shows_the_value(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"config.toml": '[api]\ntimeout_seconds = "fast"\n'})
    assert 'api.timeout_seconds = "fast"' in str(err)


def test_wrong_type_from_env_and_flag(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, {**env, "TTFTSCOPE_API__MAX_RETRIES": "many"}, {})
    assert str(err).startswith("env TTFTSCOPE_API__MAX_RETRIES: api.max_retries")
    assert err.hint == "fix or unset the variable"
    err = error(proj, env, {}, flags={"model.max_tokens": "lots"})
    assert str(err).startswith("flag --max-tokens: model.max_tokens")


def test_wrong_type_api_key_does_not_echo_it(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"config.toml": "[api]\napi_key = 1234567890123456789\n"})
    assert "1234567890123456789" not in str(err)
    assert "config.toml:2" in str(err) and "(hidden)" in str(err)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://h:8000/v1?key=1", "query string"),
        ("http://h:8000/v1/chat/completions", "ends in /chat/completions"),
        ("http://h:8000/v1/completions/", "ends in /completions"),
        ("h:8000/v1", "http:// or https://"),
    ],
)
def test_bad_base_url(proj: Path, env: dict[str, str], url: str, reason: str) -> None:
    err = error(proj, env, {"config.toml": f'\n[api]\nbase_url = "{url}"\n'})
    assert str(err).startswith("config.toml:3: api.base_url")
    assert reason in str(err)
    assert err.hint and "http://host:8000/v1" in err.hint


def test_bad_base_url_from_openai_env(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, {**env, "OPENAI_BASE_URL": "http://h/v1/chat/completions"}, {})
    assert str(err).startswith("env OPENAI_BASE_URL: api.base_url")


def test_unknown_profile_lists_existing(proj: Path, env: dict[str, str]) -> None:
    files = {
        "config.toml": "[profiles.fast.model]\nmax_tokens = 1\n",
        "settings.json": '{"profiles": {"slow": {}}}',
    }
    err = error(proj, env, files, profile="fsat")
    assert "profile 'fsat' (from --profile) is not defined in: " in str(err)
    assert str(err).endswith("in: settings.json, config.toml\n  hint: defined profiles: slow, fast")
    assert err.hint == "defined profiles: slow, fast"


def test_unknown_profile_from_env_when_no_profiles(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, {**env, "TTFTSCOPE_PROFILE": "x"}, {})
    assert "(from env TTFTSCOPE_PROFILE)" in str(err) and "no config file found" in str(err)
    assert err.hint and "[profiles.NAME]" in err.hint


@pytest.mark.parametrize(
    ("name", "text", "label"),
    [
        ("config.toml", "[api]\ntimeout = 1\ntimeout_seconds = 2\n", "config.toml:3"),
        ("settings.json", '{"model": {"default": "a",\n "name": "b"}}', "settings.json:2"),
        ("config.toml", "[profiles.p.api]\ntimeout_seconds = 1\ntimeout = 2\n", "config.toml:3"),
    ],
)
def test_both_alias_forms_in_one_file(
    proj: Path, env: dict[str, str], name: str, text: str, label: str
) -> None:
    err = error(proj, env, {name: text})
    assert str(err).startswith(label)
    assert "is given twice" in str(err)
    assert err.hint and "keep only one" in err.hint


def test_both_alias_forms_in_env(proj: Path, env: dict[str, str]) -> None:
    both = {**env, "TTFTSCOPE_API__TIMEOUT": "1", "TTFTSCOPE_API__TIMEOUT_SECONDS": "2"}
    err = error(proj, both, {})
    assert "api.timeout_seconds is given twice in the environment" in str(err)


def test_alias_in_lower_layer_and_canonical_in_higher_is_fine(
    proj: Path, env: dict[str, str]
) -> None:
    (proj / "settings.json").write_text('{"api": {"timeout": 1}}')
    (proj / "config.toml").write_text("[api]\ntimeout_seconds = 2\n")
    assert load_settings(cwd=proj, env=env).settings.api.timeout_seconds == 2


def test_missing_explicit_config_file(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {}, config_path=Path("nope.toml"))
    assert str(err).startswith("config file nope.toml does not exist")
    assert err.hint and "--config" in err.hint


def test_explicit_config_with_unknown_suffix(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, env, {"conf.yaml": "api: {}\n"}, config_path=Path("conf.yaml"))
    assert "unsupported config file type '.yaml'" in str(err)


def test_unknown_env_setting_and_flag_key(proj: Path, env: dict[str, str]) -> None:
    err = error(proj, {**env, "TTFTSCOPE_API__BASEURL": "x"}, {})
    assert str(err).startswith("env TTFTSCOPE_API__BASEURL: unknown setting")
    assert err.hint and "TTFTSCOPE_API__BASE_URL" in err.hint
    err = error(proj, env, {}, flags={"api.base": "x"})
    assert "flag key 'api.base'" in str(err) and err.hint and "api.base_url" in err.hint
