"""Chat ↔ completions translation against the real tiny vLLM, at temperature 0.

For one conversation, ``/v1/chat/completions`` (text) is compared with the translation of
``/v1/completions`` sent the chat's own ids (from vLLM's ``/tokenize`` with ``messages``):
same generated text, finish and stop reasons, usage and object shapes, streamed or not.
Streams are compared as concatenations: vLLM may merge deltas when its consumer lags, so chunk
boundaries are not reproducible between two requests.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ttftscope.client.sse import SSEDecoder
from ttftscope.gateway.apis.chat.translate import completions_body
from ttftscope.gateway.apis.chat.translate_answers import ChatStreamTranslator, chat_response
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e

MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name the planets of the solar system, in order."},
]
TIMEOUT = httpx.Timeout(300.0)


def _ids(server: LocalServer) -> tuple[list[int], int]:
    body = {"model": server.model, "messages": MESSAGES}
    r = httpx.post(server.root_url + "/tokenize", json=body, timeout=TIMEOUT)
    r.raise_for_status()
    data = r.json()
    return data["tokens"], data["max_model_len"]


def _chat_body(server: LocalServer, **extra: Any) -> dict[str, Any]:
    base = {"model": server.model, "messages": MESSAGES, "temperature": 0, "seed": 0}
    return {**base, "max_tokens": 24, **extra}


def _post(server: LocalServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(server.base_url + path, json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _stream(server: LocalServer, path: str, body: dict[str, Any]) -> list[bytes]:
    with httpx.stream("POST", server.base_url + path, json=body, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        return list(r.iter_bytes())


def _objects(raw: bytes) -> list[dict[str, Any]]:
    d = SSEDecoder()
    datas = [e.data for e in [*d.feed(raw), *d.close()]]
    assert datas[-1] == "[DONE]"
    return [json.loads(x) for x in datas[:-1]]


def _both_full(server: LocalServer, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    ids, max_model_len = _ids(server)
    chat_body = _chat_body(server, **extra)
    chat = _post(server, "/chat/completions", chat_body)
    cmpl = _post(
        server, "/completions", completions_body(chat_body, ids, max_model_len=max_model_len)
    )
    translated = chat_response(cmpl, model=server.model)
    assert chat["usage"]["prompt_tokens"] == len(ids)  # /tokenize gave the chat's own ids
    translated["created"] = chat["created"]  # one second apart at most
    return chat, translated


@pytest.mark.parametrize("extra", [{}, {"max_tokens": 3}, {"return_token_ids": True}])
def test_full_answer_is_the_chat_answer(vllm: LocalServer, extra: dict[str, Any]) -> None:
    chat, translated = _both_full(vllm, request_id="e2e-translate", **extra)
    assert translated == chat  # same base id, so even "chatcmpl-e2e-translate" matches
    ChatCompletion.model_validate(translated)


def test_stop_string_cuts_both_alike(vllm: LocalServer) -> None:
    text = _post(vllm, "/chat/completions", _chat_body(vllm))["choices"][0]["message"]["content"]
    if len(text) < 8:
        pytest.skip(f"the tiny model said too little to pick a stop string: {text!r}")
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    chat, translated = _both_full(vllm, stop=[stop], request_id="e2e-stop")
    assert translated == chat
    assert chat["choices"][0]["stop_reason"] == stop


def _shape(obj: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    choice = obj["choices"][0] if obj["choices"] else {}
    return tuple(obj), tuple(choice), tuple(choice.get("delta", {}))


def _summary(objs: list[dict[str, Any]]) -> dict[str, Any]:
    with_choices = [o for o in objs if o["choices"]]
    last = with_choices[-1]["choices"][0]
    return {
        "first": with_choices[0],
        "text": "".join(o["choices"][0]["delta"].get("content") or "" for o in with_choices),
        "finish": (last["finish_reason"], last["stop_reason"]),
        "tail": [o for o in objs if not o["choices"]],
        "shapes": {_shape(o) for o in objs},
        "last": with_choices[-1],
    }


@pytest.mark.parametrize(
    "options",
    [None, {"include_usage": True}, {"include_usage": True, "continuous_usage_stats": True}],
)
def test_stream_is_the_chat_stream(vllm: LocalServer, options: dict[str, bool] | None) -> None:
    ids, max_model_len = _ids(vllm)
    extra: dict[str, Any] = {"stream": True, "request_id": "e2e-stream"}
    if options is not None:
        extra["stream_options"] = options
    chat_body = _chat_body(vllm, **extra)
    chat = _objects(b"".join(_stream(vllm, "/chat/completions", chat_body)))
    body = completions_body(chat_body, ids, max_model_len=max_model_len)
    tr = ChatStreamTranslator(model=vllm.model, include_usage=bool(options))
    pieces = _stream(vllm, "/completions", body)
    translated = _objects(b"".join(tr.feed(p) for p in pieces) + tr.close())
    for obj in translated:
        ChatCompletionChunk.model_validate(obj)
    want, got = _summary(chat), _summary(translated)
    assert got["text"] == want["text"] and got["finish"] == want["finish"]
    assert got["shapes"] == want["shapes"]
    assert got["first"] | {"created": 0} == want["first"] | {"created": 0}
    assert [t | {"created": 0} for t in got["tail"]] == [t | {"created": 0} for t in want["tail"]]
    assert got["last"].get("system_fingerprint") == want["last"].get("system_fingerprint")
    if options:
        assert got["tail"][0]["usage"]["prompt_tokens"] == len(ids)


def test_stream_token_ids_land_where_chat_puts_them(vllm: LocalServer) -> None:
    ids, max_model_len = _ids(vllm)
    chat_body = _chat_body(vllm, stream=True, return_token_ids=True)
    chat = _objects(b"".join(_stream(vllm, "/chat/completions", chat_body)))
    tr = ChatStreamTranslator(model=vllm.model, include_usage=False)
    body = completions_body(chat_body, ids, max_model_len=max_model_len)
    translated = _objects(b"".join(tr.feed(p) for p in _stream(vllm, "/completions", body)))
    assert translated[0]["prompt_token_ids"] == chat[0]["prompt_token_ids"] == ids

    def generated(objs: list[dict[str, Any]]) -> list[int]:
        return [t for o in objs[1:] for t in o["choices"][0]["token_ids"]]

    assert generated(translated) == generated(chat)
