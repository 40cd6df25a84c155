"""Configuration that did not apply: misplaced files, shadowed values, mismatched servers."""

from __future__ import annotations

from pathlib import Path

from ttftscope.config.loader import load_settings
from ttftscope.doctor.rules.config import ConfigContext, config_findings
from ttftscope.findings import Finding


def _findings(
    proj: Path, env: dict[str, str] | None = None, **live: tuple[str, ...] | None
) -> list[Finding]:
    env = {"HOME": str(proj / "home"), **(env or {})}
    loaded = load_settings(env=env, cwd=proj, flags={})
    return config_findings(ConfigContext(loaded, proj, **live))


def _text(f: Finding) -> str:
    return f.title + " " + " ".join(e.fact for e in f.evidence) + " " + f.remedy


def test_nothing_configured_is_quiet(tmp_path: Path) -> None:
    assert _findings(tmp_path) == []


def test_a_config_file_under_a_name_that_is_never_read(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("[api]\nbase_url = 'http://h:8000/v1'\n")
    (tmp_path / "notes.yaml").write_text("shopping: eggs\n")  # not ours: not named
    (f,) = _findings(tmp_path)
    assert f.id == "config-not-applied" and f.severity == "warning"
    text = _text(f)
    assert "config.yaml" in text and "notes.yaml" not in text
    assert str(tmp_path / "config.toml") in text  # where files are looked for
    assert "--config" in f.remedy


def test_a_config_file_one_folder_up_is_found(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[model]\ndefault = 'm'\n")
    sub = tmp_path / "src"
    sub.mkdir()
    (f,) = _findings(sub)
    assert str(tmp_path / "config.toml") in _text(f)


def test_a_file_value_replaced_by_the_environment_is_named_with_both_sources(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").write_text("[model]\ndefault = 'from-file'\n")
    (f,) = _findings(tmp_path, {"TTFTSCOPE_MODEL__DEFAULT": "from-env"})
    text = _text(f)
    assert "from-file" in text and "from-env" in text
    assert "config.toml:2" in text and "TTFTSCOPE_MODEL__DEFAULT" in text


def test_the_same_key_in_two_files(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"model": {"max_tokens": 8}}')
    (tmp_path / "config.toml").write_text("[model]\nmax_tokens = 32\n")
    (f,) = _findings(tmp_path)
    assert "two config files" in f.title and "settings.json" in _text(f)


def test_a_model_the_server_does_not_serve_and_metrics_of_another_server(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").write_text("[model]\ndefault = 'qwen-coder'\n")
    (f,) = _findings(tmp_path, served_models=("tiny",), metrics_models=("llama",))
    text = _text(f)
    assert "'qwen-coder'" in text and "serves: tiny" in text
    assert "belong to another server" in text


def test_timing_on_and_no_records_written(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[observability]\nrecords_dir = 'recs'\n")
    (f,) = _findings(tmp_path)
    assert "no records were written" in f.title and "instrument" in f.remedy
    (tmp_path / "recs").mkdir()
    (tmp_path / "recs" / "instrument.jsonl").write_text("{}\n")
    assert _findings(tmp_path) == []
