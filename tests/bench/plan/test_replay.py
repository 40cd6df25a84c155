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
from ttftscope.bench.plan.bodies import BodyDefaults
from ttftscope.bench.plan.replay import ReplaySession, group_conversations, read_replay
from ttftscope.bench.plan.workload import SessionPlan, TurnPlan
from ttftscope.client.apis import Api
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


AGENTS = Path(__file__).parents[2] / "data" / "agents"
USER = [{"role": "user", "content": "hi"}]
CHAT = {"messages": [*USER, {"role": "assistant", "tool_calls": []}, *USER], "max_tokens": 8}
ANTHROPIC = {"messages": USER, "max_tokens": 8, "system": [{"type": "text", "text": "s"}]}
RESPONSES = {"input": [{"type": "message", "role": "user", "content": "hi"}], "store": False}
EITHER = {"messages": USER, "max_tokens": 8}  # fits chat and Anthropic alike


def _recorded(name: str) -> Path:
    path = AGENTS / name
    if not path.is_file():
        pytest.skip(f"{path} (recorded from the real agent) is not here")
    return path


@pytest.mark.parametrize(
    ("name", "api"), [("claude_code_bodies.jsonl", "messages"), ("codex_bodies.jsonl", "responses")]
)
def test_the_real_agents_bodies_are_told_apart_and_grouped(name: str, api: Api) -> None:
    path = _recorded(name)
    log = read_replay(path)
    lines = len(path.read_text().splitlines())
    assert log.api == api and read_replay(path, api=api).api == api
    # one agent session: every request extends the one before (cache_control marks move)
    assert [len(c) for c in log.conversations] == [lines]
    other: Api = "responses" if api == "messages" else "messages"
    with pytest.raises(ConfigError, match=f"line 1 is an .* request body, not .*--api {other}"):
        read_replay(path, api=other)


@pytest.mark.parametrize(
    ("bodies", "api", "found"),
    [
        ([CHAT, EITHER], None, "chat"),
        ([EITHER, ANTHROPIC], None, "messages"),  # the later body decides for the file
        ([EITHER], "messages", "messages"),
        ([RESPONSES, {"input": "hi", "instructions": "s"}], None, "responses"),
    ],
)
def test_a_files_api_is_the_one_every_body_fits(
    tmp_path: Path, bodies: list[dict[str, object]], api: Api | None, found: Api
) -> None:
    assert read_replay(_write(tmp_path, [json.dumps(b) for b in bodies]), api=api).api == found


@pytest.mark.parametrize(
    ("bodies", "api", "match"),
    [
        ([CHAT, RESPONSES], None, "line 2 is an OpenAI Responses .* before it are OpenAI chat"),
        ([ANTHROPIC, CHAT], None, "line 2 is an OpenAI chat completions request body, but"),
        ([EITHER, CHAT], "messages", r"line 2 is an OpenAI chat .* not Anthropic .*--api messag"),
        ([RESPONSES, ANTHROPIC], "responses", "line 2 is an Anthropic Messages request body"),
        ([CHAT, {**RESPONSES, **CHAT}], None, "line 2 has both 'messages' and 'input'"),
        ([ANTHROPIC, {**ANTHROPIC, **CHAT}], None, "line 2 mixes chat fields and Anthropic"),
        ([RESPONSES, {"input": []}], None, "line 2 has an empty 'input'"),
        ([RESPONSES, {"input": ["x"]}], None, "line 2 has an input item not an object"),
    ],
)
def test_a_body_of_another_api_is_refused_by_line(
    tmp_path: Path, bodies: list[dict[str, object]], api: Api | None, match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        read_replay(_write(tmp_path, [json.dumps(b) for b in bodies]), api=api)


@pytest.mark.parametrize(
    ("api", "recorded", "key"),
    [("messages", {"max_tokens": 32000}, "max_tokens"), ("responses", {}, "max_output_tokens")],
)
def test_each_apis_own_limit_is_kept_set_or_forced(
    api: Api, recorded: dict[str, object], key: str
) -> None:
    s = ReplaySession(SessionPlan(0, 0, ()), ({"model": "rec", **recorded},))
    turn = TurnPlan(0, 0, 0, 0, 0.0, 0)
    kept = s.body(turn, BodyDefaults("m", 4, 0.0, api=api))
    assert kept[key] == recorded.get(key, 4) and kept["model"] == "m"
    forced = s.body(turn, BodyDefaults("m", 4, 0.0, force_max_tokens=True, api=api))
    assert forced[key] == 4 and "max_completion_tokens" not in forced


def test_recorded_agent_bodies_replay_to_their_apis_path(
    fault: FaultServer, tmp_path: Path
) -> None:
    path = _recorded("codex_bodies.jsonl")
    done = run(endpoint(fault), FAST, tmp_path / "r", replay=path, num_prompts=None, max_tokens=3)
    sent = [r for r in fault.requests if r.path.endswith("/v1/responses")]
    assert done.summary["api"] == "responses" and done.summary["failed"] == 0
    assert len(sent) == done.summary["completed"] == len(path.read_text().splitlines())
    assert all(r.json()["max_output_tokens"] == 3 and r.json()["stream"] is True for r in sent)
    assert {r.variant for r in done.records} == {"responses"}
