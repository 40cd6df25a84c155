"""Layered settings: precedence, profiles, aliases, sources (file + line), derived values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ttftscope.config.loader import LoadedSettings, load_settings
from ttftscope.config.schema import KEYS, Settings, Source
from ttftscope.config.sources import env_name


def user_dir(env: dict[str, str]) -> Path:
    path = Path(env["XDG_CONFIG_HOME"]) / "ttftscope"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def load(proj: Path, env: dict[str, str], **kw: Any) -> LoadedSettings:
    return load_settings(cwd=proj, env=env, **kw)


def test_defaults_with_no_files_no_env(proj: Path, env: dict[str, str]) -> None:
    loaded = load(proj, env)
    s = loaded.settings
    assert s.api.base_url == "http://127.0.0.1:8000/v1"
    assert s.api.api_key is None
    assert s.api.timeout_seconds == 600
    assert s.api.max_retries == 0
    assert s.api.metrics_url == "http://127.0.0.1:8000/metrics"
    assert s.model.default is None
    assert (s.model.temperature, s.model.max_tokens) == (0.0, 16)
    assert not s.debug.log_request_timing and not s.debug.log_token_count
    assert s.observability.record_ttft and s.observability.record_tokenize_ms
    assert s.observability.record_queue_ms
    assert s.tokenizer.path is None
    assert loaded.files == [] and loaded.profile is None and loaded.warnings == []
    assert set(loaded.sources) == set(KEYS)
    assert {src.kind for src in loaded.sources.values()} == {"default"}
    assert loaded.sources["api.metrics_url"].detail == "default (derived from api.base_url)"


def _five_layers(
    proj: Path, env: dict[str, str], upto: int
) -> tuple[dict[str, str], dict[str, object]]:
    """Set api.base_url in the first ``upto`` layers above the defaults."""
    if upto >= 1:
        write(proj / "settings.json", '{\n  "api": {\n    "base_url": "http://json:1/v1"\n  }\n}\n')
    if upto >= 2:
        write(proj / "config.toml", '# top\n\n[api]\nbase_url = "http://toml:2/v1"\n')
    if upto >= 3:
        env = {**env, "TTFTSCOPE_API__BASE_URL": "http://env:3/v1"}
    flags: dict[str, object] = {"api.base_url": "http://flag:4/v1"} if upto >= 4 else {}
    return env, flags


@pytest.mark.parametrize(
    ("upto", "url", "detail"),
    [
        (0, "http://127.0.0.1:8000/v1", "default"),
        (1, "http://json:1/v1", "settings.json:3"),
        (2, "http://toml:2/v1", "config.toml:4"),
        (3, "http://env:3/v1", "env TTFTSCOPE_API__BASE_URL"),
        (4, "http://flag:4/v1", "flag --base-url"),
    ],
)
def test_each_layer_overrides_the_ones_below(
    proj: Path, env: dict[str, str], upto: int, url: str, detail: str
) -> None:
    env2, flags = _five_layers(proj, env, upto)
    loaded = load(proj, env2, flags=flags)
    assert loaded.settings.api.base_url == url
    assert loaded.sources["api.base_url"].detail == detail
    # metrics_url follows whichever base_url won
    assert loaded.settings.api.metrics_url == url.removesuffix("/v1") + "/metrics"


def test_layers_combine_key_by_key(proj: Path, env: dict[str, str]) -> None:
    write(proj / "settings.json", json.dumps({"model": {"max_tokens": 1, "temperature": 0.1}}))
    write(proj / "config.toml", "[model]\nmax_tokens = 2\n")
    loaded = load(proj, {**env, "TTFTSCOPE_API__MAX_RETRIES": "3"}, flags={"model.default": "m"})
    s = loaded.settings
    assert (s.model.max_tokens, s.model.temperature, s.api.max_retries) == (2, 0.1, 3)
    assert s.model.default == "m"
    kinds = {k: loaded.sources[k].kind for k in ("model.max_tokens", "model.temperature")}
    assert kinds == {"model.max_tokens": "file", "model.temperature": "file"}
    assert loaded.sources["model.max_tokens"].path == proj / "config.toml"
    assert loaded.sources["model.temperature"].path == proj / "settings.json"
    assert loaded.sources["model.default"].detail == "flag --model"
    assert loaded.files == [proj / "settings.json", proj / "config.toml"]


def test_cwd_files_override_user_dir_files(proj: Path, env: dict[str, str]) -> None:
    udir = user_dir(env)
    write(udir / "config.toml", '[api]\napi_key = "user-key-0123456789abcdef"\nmax_retries = 7\n')
    write(udir / "settings.json", '{"api": {"max_retries": 1, "timeout": 5}}')
    write(proj / "settings.json", '{"api": {"max_retries": 2}}')
    loaded = load(proj, env)
    assert loaded.settings.api.max_retries == 2
    assert loaded.settings.api.timeout_seconds == 5
    assert loaded.settings.api.api_key is not None
    assert loaded.sources["api.api_key"].detail == f"{udir / 'config.toml'}:2"
    assert loaded.files == [udir / "settings.json", udir / "config.toml", proj / "settings.json"]


def test_home_config_dir_used_without_xdg(proj: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_dir = home / ".config" / "ttftscope"
    write_dir.mkdir(parents=True)
    write(write_dir / "config.toml", "[model]\nmax_tokens = 9\n")
    loaded = load_settings(cwd=proj, env={"HOME": str(home)})
    assert loaded.settings.model.max_tokens == 9


def test_explicit_config_reads_only_that_file(proj: Path, env: dict[str, str]) -> None:
    write(proj / "config.toml", "[model]\nmax_tokens = 2\n")
    other = write(proj / "other.json", '{"model": {"temperature": 0.7}}')
    loaded = load(proj, env, config_path=Path("other.json"))
    assert loaded.settings.model.temperature == 0.7
    assert loaded.settings.model.max_tokens == 16  # ./config.toml not read
    assert loaded.files == [other]
    loaded = load(proj, env, config_path=proj / "config.toml")
    assert loaded.settings.model.max_tokens == 2


PROFILES_TOML = """\
[model]
max_tokens = 16
temperature = 0.5

[profiles.fast.model]
max_tokens = 4

[profiles.slow]
api.timeout_seconds = 1200
"""


def test_profile_overrides_top_level(proj: Path, env: dict[str, str]) -> None:
    write(proj / "config.toml", PROFILES_TOML)
    write(proj / "settings.json", '{"profiles": {"fast": {"debug": {"log_token_count": true}}}}')
    loaded = load(proj, env, profile="fast")
    assert loaded.profile == "fast"
    assert loaded.settings.model.max_tokens == 4
    assert loaded.settings.model.temperature == 0.5  # not in the profile: top level stays
    assert loaded.settings.debug.log_token_count is True
    src = loaded.sources["model.max_tokens"]
    assert src.detail == "config.toml:6 [profiles.fast]" and src.profile == "fast"
    assert loaded.sources["debug.log_token_count"].detail.endswith("[profiles.fast]")
    plain = load(proj, env)
    assert plain.settings.model.max_tokens == 16 and plain.profile is None


def test_profile_from_env_and_argument_wins(proj: Path, env: dict[str, str]) -> None:
    write(proj / "config.toml", PROFILES_TOML)
    by_env = load(proj, {**env, "TTFTSCOPE_PROFILE": "slow"})
    assert by_env.profile == "slow" and by_env.settings.api.timeout_seconds == 1200
    assert by_env.sources["api.timeout_seconds"].detail == "config.toml:9 [profiles.slow]"
    by_arg = load(proj, {**env, "TTFTSCOPE_PROFILE": "slow"}, profile="fast")
    assert by_arg.profile == "fast" and by_arg.settings.api.timeout_seconds == 600


def test_profile_in_user_dir_beats_cwd_top_level_but_not_env(
    proj: Path, env: dict[str, str]
) -> None:
    write(user_dir(env) / "settings.json", '{"profiles": {"p": {"model": {"max_tokens": 3}}}}')
    write(proj / "config.toml", "[model]\nmax_tokens = 2\n")
    assert load(proj, env, profile="p").settings.model.max_tokens == 3
    env2 = {**env, "TTFTSCOPE_MODEL__MAX_TOKENS": "5"}
    assert load(proj, env2, profile="p").settings.model.max_tokens == 5


def test_aliases_in_every_layer(proj: Path, env: dict[str, str]) -> None:
    write(proj / "settings.json", '{"model": {"name": "json-model"}, "api": {"timeout": 7}}')
    loaded = load(proj, env)
    assert loaded.settings.model.default == "json-model"
    assert loaded.settings.api.timeout_seconds == 7
    assert loaded.sources["api.timeout_seconds"].detail == "settings.json:1"
    write(proj / "config.toml", "[api]\ntimeout_seconds = 8\n[model]\ndefault = 'toml-model'\n")
    loaded = load(proj, env)
    assert loaded.settings.api.timeout_seconds == 8
    assert loaded.settings.model.default == "toml-model"
    loaded = load(proj, {**env, "TTFTSCOPE_API__TIMEOUT": "9", "TTFTSCOPE_MODEL__NAME": "e"})
    assert loaded.settings.api.timeout_seconds == 9 and loaded.settings.model.default == "e"
    assert loaded.sources["api.timeout_seconds"].detail == "env TTFTSCOPE_API__TIMEOUT"
    loaded = load(proj, env, flags={"api.timeout": 10, "model.name": "f"})
    assert loaded.settings.api.timeout_seconds == 10 and loaded.settings.model.default == "f"
    assert loaded.sources["api.timeout_seconds"].detail == "flag --timeout"


def test_model_validate_accepts_aliases_too() -> None:
    s = Settings.model_validate({"api": {"timeout": 3}, "model": {"name": "x"}})
    assert s.api.timeout_seconds == 3 and s.model.default == "x"


def test_openai_env_vars_and_ttftscope_wins(proj: Path, env: dict[str, str]) -> None:
    write(proj / "config.toml", '[api]\nbase_url = "http://file:1/v1"\n')
    openai = {
        **env,
        "OPENAI_API_KEY": "sk-openai-0123456789abcdef",
        "OPENAI_BASE_URL": "http://o:2/v1",
    }
    loaded = load(proj, openai)
    assert loaded.settings.api.base_url == "http://o:2/v1"
    assert loaded.sources["api.base_url"].detail == "env OPENAI_BASE_URL"
    key = loaded.settings.api.api_key
    assert key is not None and key.get_secret_value() == "sk-openai-0123456789abcdef"
    both = {
        **openai,
        "TTFTSCOPE_API__API_KEY": "sk-ours-0123456789abcdef",
        "TTFTSCOPE_API__BASE_URL": "http://t:3/v1",
    }
    loaded = load(proj, both)
    assert loaded.settings.api.base_url == "http://t:3/v1"
    key = loaded.settings.api.api_key
    assert key is not None and key.get_secret_value() == "sk-ours-0123456789abcdef"
    assert loaded.sources["api.api_key"] == Source("env", "env TTFTSCOPE_API__API_KEY")


def test_empty_env_and_none_flags_count_as_unset(proj: Path, env: dict[str, str]) -> None:
    loaded = load(
        proj,
        {**env, "OPENAI_API_KEY": "", "TTFTSCOPE_API__BASE_URL": ""},
        flags={"api.base_url": None, "model.max_tokens": None},
    )
    assert loaded.settings.api.api_key is None
    assert {loaded.sources[k].kind for k in ("api.base_url", "model.max_tokens")} == {"default"}


def test_env_values_are_converted(proj: Path, env: dict[str, str]) -> None:
    names = {
        "debug.log_request_timing": "true",
        "observability.record_ttft": "0",
        "model.temperature": "0.25",
        "tokenizer.path": "tok/tokenizer.json",
    }
    loaded = load(proj, {**env, **{env_name(k): v for k, v in names.items()}})
    s = loaded.settings
    assert s.debug.log_request_timing is True and s.observability.record_ttft is False
    assert s.model.temperature == 0.25
    assert s.tokenizer.path == proj / "tok" / "tokenizer.json"


def test_single_underscore_env_var_is_a_warning(proj: Path, env: dict[str, str]) -> None:
    loaded = load(proj, {**env, "TTFTSCOPE_API_BASE_URL": "http://x:1/v1", "TTFTSCOPE_OTHER": "1"})
    assert loaded.settings.api.base_url == "http://127.0.0.1:8000/v1"
    assert len(loaded.warnings) == 1
    assert "TTFTSCOPE_API__BASE_URL" in loaded.warnings[0]


TRICKY_TOML = '''\
# a comment with base_url = "nope"
[api]
# base_url = "commented"
max_retries = 1

[model]
default = """
max_tokens = 99
"""
max_tokens = 3

[profiles."my.fast"]
api.base_url = "http://p:1/v1"
debug = { log_token_count = true }
'''


def test_toml_line_numbers_for_tricky_layouts(proj: Path, env: dict[str, str]) -> None:
    write(proj / "config.toml", TRICKY_TOML)
    loaded = load(proj, env, profile="my.fast")
    src = loaded.sources
    assert src["api.max_retries"].detail == "config.toml:4"
    assert src["model.default"].line == 7
    assert src["model.max_tokens"].detail == "config.toml:10"  # not the line inside the string
    assert src["api.base_url"].detail == "config.toml:13 [profiles.my.fast]"
    assert src["debug.log_token_count"].line == 14  # inline table: the line of its key
    assert loaded.settings.model.max_tokens == 3


def test_json_line_numbers(proj: Path, env: dict[str, str]) -> None:
    text = (
        '{\n  "profiles": {"x": {"model": {}}},\n  "api": {\n    "max_retries": 2,\n'
        '    "base_url": "http://a:1/v1"\n  },\n  "tokenizer": {"path": "t.json"}\n}\n'
    )
    write(proj / "settings.json", text)
    loaded = load(proj, env)
    assert loaded.sources["api.max_retries"].detail == "settings.json:4"
    assert loaded.sources["api.base_url"].line == 5
    assert loaded.sources["tokenizer.path"].line == 7
    assert loaded.settings.tokenizer.path == proj / "t.json"  # relative to the file


def test_metrics_url_explicit_and_derived_with_prefix(proj: Path, env: dict[str, str]) -> None:
    write(proj / "config.toml", '[api]\nbase_url = "https://gw.example:8443/proxy/v1/"\n')
    loaded = load(proj, env)
    assert loaded.settings.api.base_url == "https://gw.example:8443/proxy/v1"
    assert loaded.settings.api.metrics_url == "https://gw.example:8443/proxy/metrics"
    loaded = load(proj, env, flags={"api.metrics_url": "http://m:9/metrics"})
    assert loaded.settings.api.metrics_url == "http://m:9/metrics"
    assert loaded.sources["api.metrics_url"].kind == "flag"


def test_tokenizer_path_relative_to_user_dir_file(proj: Path, env: dict[str, str]) -> None:
    udir = user_dir(env)
    write(udir / "config.toml", '[tokenizer]\npath = "vocab/tok.json"\n')
    assert load(proj, env).settings.tokenizer.path == udir / "vocab" / "tok.json"


def test_table_and_rows(proj: Path, env: dict[str, str]) -> None:
    secret = "sk-abcdefghijklmnopqrstuvwx"
    loaded = load(proj, {**env, "OPENAI_API_KEY": secret}, flags={"tokenizer.path": "/t.json"})
    table = loaded.table()
    assert [row[0] for row in table] == KEYS
    row = dict((k, (v, s)) for k, v, s in table)
    assert row["api.api_key"] == ("sk-…uvwx", "env OPENAI_API_KEY")
    assert row["debug.log_token_count"] == ("false", "default")
    assert row["model.default"] == ("(not set)", "default")
    assert secret not in repr(table) and secret not in repr(loaded.settings)
    rows = loaded.rows()
    assert json.loads(json.dumps(rows)) == rows
    by_key = {r["key"]: r for r in rows}
    assert by_key["api.api_key"]["value"] == "sk-…uvwx"
    assert by_key["tokenizer.path"] == {
        "key": "tokenizer.path",
        "value": "/t.json",
        "source": "flag --tokenizer",
    }
    assert by_key["model.max_tokens"]["value"] == 16
    assert loaded.secrets() == [secret]


def test_every_setting_says_what_it_expects() -> None:
    from ttftscope.config.schema import EXPECTED, KEYS

    # a wrong value of a key missing here raised KeyError instead of a ConfigError
    assert [k for k in KEYS if k not in EXPECTED and "." in k] == []
