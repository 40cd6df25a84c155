"""API keys are shown only redacted, and never survive redact_text."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from ttftscope.config.loader import load_settings
from ttftscope.config.redact import redact, redact_text
from ttftscope.errors import ConfigError


@pytest.mark.parametrize(
    ("secret", "shown"),
    [
        ("sk-proj-0123456789abcdefWXYZ", "sk-…WXYZ"),
        ("0123456789abcdefWXYZ", "…WXYZ"),
        ("abcd-0123456789abcdefWXYZ", "…WXYZ"),  # prefix longer than 3 chars is not kept
        ("sk-short", "…"),
        ("", "…"),
        (None, "(not set)"),
    ],
)
def test_redact_examples(secret: str | None, shown: str) -> None:
    assert redact(secret) == shown


def test_redact_accepts_secretstr() -> None:
    assert redact(SecretStr("sk-0123456789abcdefghij")) == "sk-…ghij"


def test_redact_text_handles_bearer_and_url_encoding() -> None:
    secret = "sk-a/b+c=0123456789abcdef"
    text = f"GET /v1?key={quote(secret, safe='')} Authorization: Bearer {secret}"
    out = redact_text(text, [secret, None, ""])
    assert secret not in out and quote(secret, safe="") not in out
    assert out.count("sk-…cdef") == 2


def test_redact_text_masks_unknown_bearer_tokens() -> None:
    out = redact_text("header Bearer tok_0123456789abcdefghijklm and more", [])
    assert out == "header Bearer …jklm and more"


def test_overlapping_secrets_leave_no_trace() -> None:
    long, short = "sk-0123456789abcdef-tail", "-tail"
    out = redact_text(f"x {long} y {short}", [short, long])
    assert long not in out and short not in out


_KEY_CHARS = st.characters(exclude_categories=["Cs"], exclude_characters="…")


@given(
    secret=st.text(_KEY_CHARS, min_size=1, max_size=60),
    before=st.text(_KEY_CHARS, max_size=40),
    after=st.text(_KEY_CHARS, max_size=40),
    bearer=st.booleans(),
)
def test_random_key_never_survives_redact_text(
    secret: str, before: str, after: str, bearer: bool
) -> None:
    middle = f"Bearer {secret}" if bearer else secret
    text = f"{before}{middle}{after}{secret}{quote(secret, safe='')}"
    out = redact_text(text, [secret])
    assert secret not in out
    if len(secret) >= 16:
        assert redact(secret) in out


@given(st.text(_KEY_CHARS, min_size=16, max_size=80))
def test_redacted_form_reveals_at_most_seven_chars(secret: str) -> None:
    shown = redact(secret)
    assert len(shown.replace("…", "")) <= 7
    assert secret not in shown


def test_key_never_in_errors_or_repr(tmp_path: Path) -> None:
    secret = "sk-live-9f8e7d6c5b4a39281706"
    env = {"XDG_CONFIG_HOME": str(tmp_path), "OPENAI_API_KEY": secret}
    loaded = load_settings(cwd=tmp_path, env=env)
    assert secret not in repr(loaded) and secret not in str(loaded.settings.model_dump())
    (tmp_path / "config.toml").write_text("[api]\napi_key = [1, 2]\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, env=env)
    assert secret not in str(info.value)
