"""Request bodies from files and logs, and which requests are one conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttftscope.doctor.logged_bodies import conversation_pairs, read_body, read_request_log
from ttftscope.errors import ConfigError

Body = dict[str, object]


def _sys(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


def _msg(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text}


def _chat(*messages: dict[str, str], model: str = "m") -> Body:
    return {"model": model, "messages": list(messages)}


def test_log_lines_are_bodies_or_skipped_by_number(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    lines = [
        json.dumps(_chat(_msg("user", "a"))),
        '{"messages": [',  # torn by a kill
        "",
        json.dumps({"time": 1, "body": {"prompt": "p"}}),
        json.dumps({"request": _chat(_msg("user", "b"))}),
        json.dumps({"messages": "not a list"}),
        "[1, 2]",
    ]
    path.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe\n")
    log = read_request_log(path)
    assert [b.get("prompt") or b["messages"] for b in log.bodies] == [
        [_msg("user", "a")],
        "p",
        [_msg("user", "b")],
    ]
    assert log.lines == (1, 4, 5)
    assert log.skipped_lines == (2, 6, 7, 8) and log.skipped == 4


def test_a_missing_log_or_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read .*nope\.jsonl") as missing:
        read_request_log(tmp_path / "nope.jsonl")
    assert missing.value.hint
    with pytest.raises(ConfigError, match="is a directory"):
        read_request_log(tmp_path)


@given(st.binary(max_size=300))
def test_any_bytes_read_as_a_log_without_raising(raw: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.jsonl"
        path.write_bytes(raw)
        log = read_request_log(path)
    assert len(log.bodies) == len(log.lines)
    assert set(log.lines).isdisjoint(log.skipped_lines)


def test_a_body_file_with_bad_json_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{\n  "messages": [\n    {"role": "user",}\n  ]\n}\n')
    with pytest.raises(ConfigError) as bad:
        read_body(path)
    assert "a.json is not valid JSON" in bad.value.message
    assert "line 3, column 21" in bad.value.message


def test_a_body_file_without_messages_or_prompt_says_what_is_needed(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"model": "m"}')
    with pytest.raises(ConfigError, match="no 'messages' or 'prompt'") as bad:
        read_body(path)
    assert bad.value.hint and "messages" in bad.value.hint
    (tmp_path / "b.json").write_bytes(b'{"prompt": "\xff"}')
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_body(tmp_path / "b.json")


def test_a_conversation_pairs_with_its_previous_turn_across_interleaving() -> None:
    one = [_sys("Now: 10:00"), _msg("user", "plan a trip")]
    two = [_sys("Now: 10:00"), _msg("user", "fix my code")]
    bodies = [
        _chat(*one),
        _chat(*two),
        _chat(_sys("Now: 10:01"), *one[1:], _msg("assistant", "ok"), _msg("user", "more")),
        _chat(*two, _msg("assistant", "done"), _msg("user", "thanks")),
    ]
    assert conversation_pairs(bodies) == [(0, 2), (1, 3)]


def test_sharing_only_a_system_prompt_is_not_one_conversation() -> None:
    system = _sys("You are a coding agent. " * 20)
    a = _chat(system, _msg("user", "first task"), _msg("assistant", "x"), _msg("user", "y"))
    b = _chat(system, _msg("user", "other task"), _msg("assistant", "p"), _msg("user", "q"))
    c = _chat(
        system,
        _msg("user", "third"),
        _msg("assistant", "x"),
        _msg("user", "y"),
        _msg("assistant", "z"),
    )
    assert conversation_pairs([a, b]) == []
    assert conversation_pairs([_chat(system, _msg("user", "a")), _chat(system)]) == []
    # later turns equal but only one of three: still another conversation
    c2 = _chat(
        system,
        _msg("user", "3rd"),
        _msg("assistant", "x"),
        _msg("user", "other"),
        _msg("assistant", "w"),
    )
    assert conversation_pairs([c, c2]) == []


def test_a_dynamic_first_user_message_still_pairs_by_the_later_turns() -> None:
    a = _chat(_msg("user", "[2026-12-01 10:00] hello"), _msg("assistant", "hi"), _msg("user", "go"))
    b = _chat(
        _msg("user", "[2026-12-01 10:02] hello"),
        _msg("assistant", "hi"),
        _msg("user", "go"),
        _msg("assistant", "done"),
        _msg("user", "next"),
    )
    assert conversation_pairs([a, b]) == [(0, 1)]


def test_other_models_shorter_requests_and_completions() -> None:
    a = _chat(_msg("user", "q"), _msg("assistant", "r"), _msg("user", "s"))
    assert conversation_pairs([a, _chat(_msg("user", "q"), model="other")]) == []
    assert conversation_pairs([a, _chat(_msg("user", "q"))]) == []  # B has fewer messages
    assert conversation_pairs([a, a]) == [(0, 1)]  # a retry
    head = "Document: " + "lorem ipsum " * 20
    prompts = [{"prompt": f"t=1 {head}"}, {"prompt": "unrelated"}, {"prompt": f"t=2 {head} more"}]
    assert conversation_pairs(prompts) == [(0, 2)]
