"""The upstream bodies: spliced ids parse to the same request a full dump gives."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ttftscope.gateway.transport.idsbody import IdsJson, chat_ids_body, splice_ids, trim_messages

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
_bodies = st.dictionaries(st.text().filter(lambda k: k != "prompt"), _json, max_size=5)
_ids = st.lists(st.integers(0, 2**31), max_size=50)


@given(_bodies, _ids)
def test_splice_is_the_body_with_the_ids(body: dict[str, Any], ids: list[int]) -> None:
    assert orjson.loads(splice_ids(body, "prompt", orjson.dumps(ids))) == {**body, "prompt": ids}


@given(_bodies, _ids)
def test_chat_ids_body_replaces_any_kv_transfer_params(
    body: dict[str, Any], ids: list[int]
) -> None:
    sent = orjson.loads(chat_ids_body({**body, "kv_transfer_params": {"x": 1}}, orjson.dumps(ids)))
    assert sent.pop("kv_transfer_params") == {"prompt_token_ids": ids}
    assert sent.keys() == body.keys()


# a turn: keep a prefix of the previous ids (any length, up to all), then add new ones; the
# lengths cross the 1024-id blocks
_turns = st.lists(
    st.tuples(st.floats(0, 1), st.lists(st.integers(0, 2**31), max_size=1500)),
    min_size=1,
    max_size=6,
)


def _cut(ids: list[int], share: float) -> int:
    return int(len(ids) * share)


@given(_turns, st.integers(0, 5))
def test_ids_json_is_always_the_dump_of_the_ids(
    turns: list[tuple[float, list[int]]], fork_at: int
) -> None:
    """Each update gives the same bytes as dumping the whole list; a fork evolves alone."""
    json, ids = IdsJson(), list[int]()
    forked: tuple[IdsJson, list[int]] | None = None
    for i, (share, extra) in enumerate(turns):
        kept = _cut(ids, share)
        ids = ids[:kept] + extra
        assert json.update(ids, kept) == orjson.dumps(ids)
        if i == fork_at:
            forked = (json.fork(), list(ids))
    if forked is not None:  # the fork still holds its own ids, whatever came after
        copy, its_ids = forked
        assert copy.update([*its_ids, 7], len(its_ids)) == orjson.dumps([*its_ids, 7])


def test_ids_json_serializes_again_only_after_the_kept_ids() -> None:
    json = IdsJson()
    json.update(list(range(5000)), 0)
    first = list(json.blocks)
    json.update([*range(4500), 1, 2], 4500)
    # the four blocks wholly inside the kept 4,500 ids are the very same bytes objects
    assert all(new is old for new, old in zip(json.blocks[:4], first[:4], strict=True))
    assert json.blocks[4] is not first[4]


def test_trimming_keeps_roles_types_and_tool_calls_but_no_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[Any] = [
        {"role": "system", "content": "long context"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "result", "tool_call_id": "c1", "name": "f"},
    ]
    assert trim_messages(messages) == [
        {"role": "system", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "", "tool_call_id": "c1", "name": "f"},
    ]
    assert messages[0]["content"] == "long context"  # the client's body is left alone
