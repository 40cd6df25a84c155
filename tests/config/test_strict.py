"""Values in files are typed: a boolean timeout or a string flag is an error, not coerced."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftscope.config.loader import load_settings
from ttftscope.errors import ConfigError


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("[api]\ntimeout = true\n", "api.timeout_seconds"),
        ('[debug]\nlog_request_timing = "yes"\n', "debug.log_request_timing"),
        ('[model]\nmax_tokens = "16"\n', "model.max_tokens"),
    ],
)
def test_wrong_types_in_files_are_errors(tmp_path: Path, body: str, key: str) -> None:
    (tmp_path / "config.toml").write_text(body)
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, cwd=tmp_path)
    assert "config.toml:2" in str(info.value) and key in str(info.value)


def test_environment_text_still_coerces(tmp_path: Path) -> None:
    loaded = load_settings(
        env={"TTFTSCOPE_DEBUG__LOG_REQUEST_TIMING": "true", "TTFTSCOPE_API__TIMEOUT_SECONDS": "30"},
        cwd=tmp_path,
    )
    assert loaded.settings.debug.log_request_timing is True
    assert loaded.settings.api.timeout_seconds == 30.0


def test_integers_are_fine_for_float_keys_in_files(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[api]\ntimeout = 30\n[tokenizer]\npath = "t.json"\n')
    loaded = load_settings(env={}, cwd=tmp_path)
    assert loaded.settings.api.timeout_seconds == 30.0
    assert loaded.settings.tokenizer.path == tmp_path / "t.json"
