"""``ttftscope prefix-diff``: text at 80 columns, JSON, exit codes 0 / 1 / 2."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.tokenizer_fixtures.tiny import tiny_tokenizer_dir
from ttftscope.cli.console import make_console
from ttftscope.cli.options import CliState
from ttftscope.cli.prefix_diff import prefix_diff
from ttftscope.errors import ConfigError

# the tiny model's tokenizer, built before a test points HOME elsewhere (the cache is under it)
TINY = str(tiny_tokenizer_dir())
RULES = " ".join(f"Rule {i}: be brief." for i in range(40))


def _body(now: str, *turns: str) -> dict[str, object]:
    messages = [{"role": "system", "content": f"Time: {now}. {RULES}"}]
    roles = ("user", "assistant")
    messages += [{"role": roles[i % 2], "content": t} for i, t in enumerate(("hi", *turns))]
    return {"model": "m", "temperature": 0, "messages": messages}


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def _write(folder: Path, name: str, body: object) -> str:
    (folder / name).write_text(json.dumps(body))
    return name


def _run(*args: str) -> Result:
    state = CliState(err=make_console(file=io.StringIO()))
    return CliRunner().invoke(prefix_diff, list(args), obj=state)


def test_a_changed_timestamp_exits_1_and_shows_where_and_what(isolated: Path) -> None:
    a = _write(isolated, "a.json", _body("2026-12-01T10:00:00Z"))
    b = _write(isolated, "b.json", _body("2026-12-01T10:04:00Z", "hello", "more"))
    tok = TINY
    result = _run(a, b, "--tokenizer", tok)
    assert result.exit_code == 1, result.output
    out = result.output
    assert "diverges at char" in out and "(token " in out and "chat template" in out
    assert "timestamp at char" in out and "2026-12-01T10:04:00Z" in out
    assert "KV blocks of 16" in out and "prefix cache" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "KV blocks of 32" in _run(a, b, "--tokenizer", tok, "--block-size", "32").output


def test_a_continued_conversation_exits_0(isolated: Path) -> None:
    a = _write(isolated, "a.json", _body("2026-12-01"))
    b = _write(isolated, "b.json", _body("2026-12-01", "hello", "more"))
    result = _run(a, b)
    assert result.exit_code == 0, result.output
    assert "no divergence" in result.output


def test_json_output_carries_the_diff_and_the_losses(isolated: Path) -> None:
    a = _write(isolated, "a.json", _body("7"))
    b = _write(isolated, "b.json", _body("8", "x", "y"))
    result = _run(a, b, "--json", "--tokenizer", TINY)
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["a"] == "a.json" and doc["rendering"] == "chat_template"
    assert doc["dynamic"][0]["kind"] == "counter"
    assert doc["lost_tokens"] > 0 and doc["blocks_lost"] >= 1 and 0 < doc["hit_rate_cost"] < 1


def test_a_log_reports_its_pairs_worst_first(isolated: Path) -> None:
    lines = []
    turns: list[str] = []
    for minute in range(4):
        lines.append(json.dumps(_body(f"2026-12-01T10:0{minute}:00Z", *turns)))
        lines.append(
            json.dumps({**_body("fixed", *turns), "messages": [{"role": "user", "content": "own"}]})
        )
        turns += [f"answer {minute} " * (minute * 20 + 1), f"next {minute}"]
    (isolated / "requests.jsonl").write_text("\n".join(lines) + "\n{torn\n")
    result = _run("requests.jsonl")
    assert result.exit_code == 1, result.output
    out = result.output
    assert "8 requests, 1 line skipped" in out and "3 losing reuse" in out
    assert "worst:" in out and "first:" in out
    assert out.index("worst:") < out.index("first:")
    assert max(len(line) for line in out.splitlines()) <= 80
    doc = json.loads(_run("requests.jsonl", "--json").output)
    assert doc["requests"] == 8 and doc["skipped_lines"] == [9]
    assert [(p["line_a"], p["line_b"]) for p in doc["pairs"]][:2] == [(1, 3), (2, 4)]


def test_the_configured_tokenizer_is_used(isolated: Path) -> None:
    (isolated / "config.toml").write_text(f'[tokenizer]\npath = "{TINY}"\n')
    a = _write(isolated, "a.json", _body("1"))
    doc = json.loads(_run(a, a, "--json").output)
    assert doc["rendering"] == "chat_template" and doc["tokens_a"] > 0


def _main(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from ttftscope.cli import main; main()", "prefix-diff", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)},
        timeout=60,
        check=False,
    )


def test_bad_input_is_a_config_error_naming_the_file(isolated: Path) -> None:
    _write(isolated, "ok.json", _body("1"))
    (isolated / "bad.json").write_text('{"messages": [\n  {"role": "user"\n}')
    (isolated / "empty.jsonl").write_text("nope\n")
    cases = {
        ("missing.json", "ok.json"): "cannot read missing.json",
        ("bad.json", "ok.json"): "bad.json is not valid JSON: Expecting ',' delimiter at line 3",
        ("empty.jsonl",): "empty.jsonl holds no request bodies (1 line skipped)",
        ("ok.json", "ok.json", "ok.json"): "two request files or one log",
    }
    for args, message in cases.items():
        error = _run(*args).exception
        assert isinstance(error, ConfigError), (args, error)
        assert message in str(error) and error.hint, (args, str(error))


def test_through_main_bad_input_exits_2_and_a_loss_exits_1(tmp_path: Path) -> None:
    _write(tmp_path, "a.json", _body("1"))
    _write(tmp_path, "b.json", _body("2", "x", "y"))
    (tmp_path / "bad.json").write_text("{")
    bad = _main("bad.json", "a.json", cwd=tmp_path)
    assert bad.returncode == 2, bad.stderr
    assert "error: bad.json is not valid JSON" in bad.stderr and "hint:" in bad.stderr
    assert "Traceback" not in bad.stderr
    lost = _main("a.json", "b.json", cwd=tmp_path)
    assert lost.returncode == 1, lost.stderr
    assert "changed: counter" in lost.stdout
