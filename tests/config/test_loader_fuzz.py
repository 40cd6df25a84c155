"""Fuzz: any file text, environment and flag values end in settings or in ConfigError."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttftscope.config.loader import load_settings
from ttftscope.config.schema import KEYS
from ttftscope.errors import ConfigError

_NASTY = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "\r\n",
        "\x00",
        "\u2028",
        "\ud800",
        "~nosuchuser-x/y",
        "~/x",
        "nan",
        "inf",
        "-1",
        "0",
        "1e309",
        "9" * 5000,
        "http://127.0.0.1:99999/v1",
        "http://u:p@h/v1",
        "http://h/v1?k=v",
        "http://h:abc/v1",
        "http://h/v1/chat/completions",
        "true",
        "yes",
        "[",
        "{",
        '"',
        "'",
        "é",
        "😀",
    ]
)
_VALUE = st.one_of(_NASTY, st.text(max_size=40))
_SCALAR_TOML = st.one_of(
    st.integers().map(str),
    st.floats().map(lambda f: repr(f).replace("inf", "inf")),
    st.booleans().map(lambda b: "true" if b else "false"),
    _VALUE.map(lambda v: '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    _NASTY,
)
_KEY = st.sampled_from([*KEYS, "api.nope", "model.name", "api.timeout", "x.y", "api"])


@st.composite
def _toml(draw: st.DrawFn) -> str:
    lines = []
    for key in draw(st.lists(_KEY, max_size=6)):
        section, _, name = key.partition(".")
        prefix = draw(st.sampled_from(["", "profiles.p."]))
        lines.append(f"[{prefix}{section}]")
        lines.append(f"{name or 'k'} = {draw(_SCALAR_TOML)}")
    if draw(st.booleans()):
        lines.append(draw(st.text(max_size=30)))
    return "\n".join(lines) + "\n"


def _env_name(key: str) -> str:
    section, _, name = key.partition(".")
    return f"TTFTSCOPE_{section.upper()}__{name.upper()}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    toml=_toml(),
    json_text=st.one_of(st.just(""), st.text(max_size=60), st.just("[" * 3000)),
    env=st.dictionaries(_KEY.map(_env_name), _VALUE, max_size=4),
    flags=st.dictionaries(st.sampled_from(KEYS), _VALUE, max_size=3),
    profile=st.sampled_from([None, "p", "missing"]),
)
def test_any_layers_load_or_raise_config_error(
    toml: str, json_text: str, env: dict[str, str], flags: dict[str, str], profile: str | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "config.toml").write_text(toml, encoding="utf-8", errors="surrogatepass")
        if json_text:
            (cwd / "settings.json").write_text(json_text, encoding="utf-8", errors="surrogatepass")
        env = {**env, "HOME": tmp, "XDG_CONFIG_HOME": str(cwd / "xdg")}
        try:
            loaded = load_settings(env=env, cwd=cwd, flags=flags, profile=profile)
        except ConfigError:
            return
        assert set(loaded.sources) == set(KEYS)
        loaded.table()
        loaded.rows()
