"""Replay: recorded requests regroup into their conversations; bad files say which line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.bench.conftest import FAST, endpoint, run
from tests.faultserver import FaultServer
from ttftscope.bench.replay import ReplaySession, group_conversations, read_replay
from ttftscope.bench.sessions import BodyDefaults
from ttftscope.bench.workload import SessionPlan, TurnPlan
from ttftscope.errors import ConfigError


def _conversation(n: int, turns: int, shared_system: bool) -> list[dict[str, object]]:
    system = {"role": "system", "content": "sys" if shared_system else f"sys {n}"}
    messages: list[dict[str, str]] = [system]
    out: list[dict[str, object]] = []
    for t in range(turns):
        messages = [*messages, {"role": "user", "content": f"c{n} t{t}"}]
        out.append({"model": "x", "messages": messages})
        messages = [*messages, {"role": "assistant", "content": "ok"}]
    return out


@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.booleans(), st.randoms())
def test_interleaved_conversations_are_regrouped(
    turns: list[int], shared_system: bool, rnd: random.Random
) -> None:
    convs = [_conversation(n, t, shared_system) for n, t in enumerate(turns)]
    queues = [list(c) for c in convs]
    log = []
    while any(queues):  # interleave, each conversation's requests kept in order
        q = rnd.choice([q for q in queues if q])
        log.append(q.pop(0))
    groups = group_conversations(log)
    assert sorted(map(len, groups)) == sorted(turns)
    assert sorted(json.dumps(g) for g in groups) == sorted(json.dumps(c) for c in convs)


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{not json", "line 2 is not JSON"),
        ('{"prompt": "x"}', "line 2 has no 'messages' list"),
        ('{"messages": [{"content": "x"}]}', "line 2 has a message without a 'role'"),
        ('{"messages": [{"role": "user", "content": "\\ud800"}]}', "line 2 is not JSON"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, line: str, match: str) -> None:
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(ConfigError, match=match):
        read_replay(_write(tmp_path, [good, line]))


def test_an_empty_or_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no requests"):
        read_replay(_write(tmp_path, [""]))
    with pytest.raises(ConfigError, match="cannot read --replay"):
        read_replay(tmp_path / "missing.jsonl")


def test_the_run_sets_model_and_keeps_a_recorded_limit_unless_forced() -> None:
    s = ReplaySession(SessionPlan(0, 0, ()), ({"model": "rec", "messages": [], "max_tokens": 99},))
    turn = TurnPlan(0, 0, 0, 0, 0.0, 0)
    assert s.body(turn, BodyDefaults("m", 4, 0.0))["max_tokens"] == 99
    forced = s.body(turn, BodyDefaults("m", 4, 0.0, force_max_tokens=True, extra={"k": 1}))
    assert (forced["model"], forced["max_tokens"], forced["k"]) == ("m", 4, 1)


def test_a_replay_sends_the_recorded_conversations(fault: FaultServer, tmp_path: Path) -> None:
    convs = [_conversation(n, 3, True) for n in range(2)]
    lines = [json.dumps(b) for pair in zip(*convs, strict=True) for b in pair]
    path = _write(tmp_path, lines)
    done = run(endpoint(fault), FAST, tmp_path / "r", replay=path, num_prompts=None)
    sent = [r.json()["messages"] for r in fault.requests if r.path.endswith("/chat/completions")]
    assert sorted(map(json.dumps, sent)) == sorted(
        json.dumps(b["messages"]) for b in map(json.loads, lines)
    )
    assert done.summary["workload"] == "replay" and done.summary["completed"] == 6
    assert sorted((r.session, r.turn) for r in done.records) == [
        (s, t) for s in (0, 1) for t in (0, 1, 2)
    ]
    first_two = run(endpoint(fault), FAST, tmp_path / "r2", replay=path, num_prompts=2)
    assert first_two.summary["completed"] == 2
