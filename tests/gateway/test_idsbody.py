"""The upstream bodies: spliced ids parse to the same request a full dump gives."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ttftscope.gateway.idsbody import chat_ids_body, splice_ids, trim_messages

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
_bodies = st.dictionaries(st.text().filter(lambda k: k != "prompt"), _json, max_size=5)
_ids = st.lists(st.integers(0, 2**31), max_size=50)


@given(_bodies, _ids)
def test_splice_is_the_body_with_the_ids(body: dict[str, Any], ids: list[int]) -> None:
    assert orjson.loads(splice_ids(body, "prompt", ids)) == {**body, "prompt": ids}


@given(_bodies, _ids)
def test_chat_ids_body_replaces_any_kv_transfer_params(
    body: dict[str, Any], ids: list[int]
) -> None:
    sent = orjson.loads(chat_ids_body({**body, "kv_transfer_params": {"x": 1}}, ids))
    assert sent.pop("kv_transfer_params") == {"prompt_token_ids": ids}
    assert sent.keys() == body.keys()


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
