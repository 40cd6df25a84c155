"""Chat ↔ completions translation: request mapping, refusals, stream and full answers.

The expected chat objects (``GOLDEN_*``) are what vLLM 0.32's own pydantic models serialize to
(``ChatCompletionStreamResponse.model_dump_json(exclude_unset=True)`` per chunk,
``exclude_none`` for the usage chunk, ``ChatCompletionResponse.model_dump()``), printed once
from the vLLM venv; the completions streams are built in vLLM's ``CompletionStreamResponse``
shape. Every produced object is also validated with the official ``openai`` SDK types.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ttftscope.client.sse import SSEDecoder
from ttftscope.gateway.apis.chat.translate import (
    CannotTranslate,
    TranslateReason,
    completions_body,
)
from ttftscope.gateway.apis.chat.translate_answers import ChatStreamTranslator, chat_response

USER = [{"role": "user", "content": "hi"}]
CHAT: dict[str, Any] = {"model": "tiny", "messages": USER}
IDS = [100264, 882, 198, 6151, 100265]
FP = "vllm-0.32.0-1a2b3c4d"


def translate(extra: dict[str, Any], max_model_len: int | None = 64, **kw: Any) -> dict[str, Any]:
    return completions_body(
        {**CHAT, **extra}, kw.pop("ids", IDS), max_model_len=max_model_len, **kw
    )


# ---------------------------------------------------------------- request mapping

FORWARDED_SAMPLES: dict[str, Any] = {
    "frequency_penalty": 0.5, "logit_bias": {"42": -100.0}, "presence_penalty": -0.25,
    "seed": 1234, "stop": ["\n\n", "END"], "stream": True,
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    "temperature": 0.0, "top_p": 0.9, "user": "u-1", "top_k": 40, "min_p": 0.05,
    "repetition_penalty": 1.1, "watermarking": None, "length_penalty": 1.0,
    "stop_token_ids": [100265, 7], "include_stop_str_in_output": True, "ignore_eos": True,
    "min_tokens": 3, "skip_special_tokens": False, "spaces_between_special_tokens": False,
    "truncate_prompt_tokens": 4, "truncation_side": "left", "allowed_token_ids": [1, 2, 3],
    "bad_words": ["bad"], "priority": -2, "request_id": "req-7", "session_id": "s-1",
    "return_tokens_as_token_ids": True, "return_token_ids": True,
    "routed_experts_prompt_start": 2, "return_token_offsets": False, "mm_payload": "tensors",
    "return_mm_kwargs": None, "cache_salt": "salt-salt-salt",
    "kv_transfer_params": {"do_remote_decode": True}, "ec_transfer_params": {"x": 1},
    "vllm_xargs": {"k": "v"}, "repetition_detection": {"max_pattern_size": 4},
    "stream_interval": 2,
}  # fmt: skip


@pytest.mark.parametrize(("name", "value"), FORWARDED_SAMPLES.items())
def test_sampling_and_vllm_fields_are_forwarded_verbatim(name: str, value: Any) -> None:
    out = translate({name: value, "max_tokens": 5})
    assert out[name] == value
    assert out["prompt"] == IDS and out["max_tokens"] == 5


def test_model_and_prompt_lead_and_chat_order_follows() -> None:
    out = translate({"seed": 1, "temperature": 0, "max_tokens": 3})
    assert list(out) == ["model", "prompt", "seed", "temperature", "max_tokens"]
    assert out["prompt"] is not IDS  # a copy: the caller's list is not shared


def test_prompt_side_fields_are_consumed_not_sent() -> None:
    extra = {"chat_template": "{{ messages }}", "chat_template_kwargs": {"enable_thinking": 0},
             "documents": [{"title": "t", "text": "x"}], "add_generation_prompt": True,
             "continue_final_message": False, "add_special_tokens": True,
             "max_tokens": 2}  # fmt: skip
    assert translate(extra) == {"model": "tiny", "prompt": IDS, "max_tokens": 2}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"max_completion_tokens": 7, "max_tokens": 3}, 7),
        ({"max_completion_tokens": None, "max_tokens": 3}, 3),
        ({"max_tokens": 0}, 0),
        ({"max_tokens": 10**9}, 10**9),  # the upstream clamps / rejects as chat would
    ],
)
def test_max_completion_tokens_wins_then_max_tokens(extra: dict[str, Any], expected: int) -> None:
    assert translate(extra)["max_tokens"] == expected


@pytest.mark.parametrize(
    ("extra", "generation_max", "expected"),
    [
        ({}, None, 64 - len(IDS)),
        ({"max_tokens": None}, None, 64 - len(IDS)),  # null is "absent" in chat, 16 in cmpl
        ({}, 8, 8),  # generation_config max_new_tokens caps the default
        ({}, 1000, 64 - len(IDS)),
        ({"truncate_prompt_tokens": 2}, None, 62),  # chat counts the truncated prompt
        ({"truncate_prompt_tokens": 50}, None, 64 - len(IDS)),
        ({"truncate_prompt_tokens": -1}, None, 64 - len(IDS)),
    ],
)
def test_default_max_tokens_is_what_is_left_of_the_context(
    extra: dict[str, Any], generation_max: int | None, expected: int
) -> None:
    assert translate(extra, generation_max_tokens=generation_max)["max_tokens"] == expected


def test_n_is_kept_without_stream_and_null_n_is_dropped() -> None:
    assert translate({"n": 3, "max_tokens": 1})["n"] == 3
    assert "n" not in translate({"n": None, "max_tokens": 1})  # completions' n is not nullable
    assert translate({"n": 1, "stream": True, "max_tokens": 1})["n"] == 1


@pytest.mark.parametrize(
    "extra",
    [
        {"logprobs": False, "top_logprobs": 0},
        {"logprobs": None, "top_logprobs": None, "prompt_logprobs": None},
        {"logprob_token_ids": []},
        {"tools": None, "tool_choice": "none", "parallel_tool_calls": True},
        {"tool_choice": None},
        {"response_format": None, "structured_outputs": None},
        {"reasoning_effort": None, "include_reasoning": True, "thinking_token_budget": None},
        {"use_beam_search": False, "echo": False, "return_prompt_text": False},
        {"media_io_kwargs": None, "mm_processor_kwargs": None},
    ],
)
def test_neutral_values_of_chat_only_fields_translate(extra: dict[str, Any]) -> None:
    assert translate({**extra, "max_tokens": 1}) == translate({"max_tokens": 1})


def test_prefill_of_an_assistant_message_keeps_the_assistant_role() -> None:
    messages = [*USER, {"role": "assistant", "content": "Sure "}]
    prefill = {"messages": messages, "add_generation_prompt": False, "continue_final_message": True}
    out = completions_body(prefill, IDS, max_model_len=64)
    assert out == {"prompt": IDS, "max_tokens": 64 - len(IDS)}


def test_text_content_parts_translate() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "a"}]}]
    assert completions_body({"messages": messages, "max_tokens": 1}, IDS, max_model_len=None)


# ---------------------------------------------------------------- refusals

REFUSALS: list[tuple[dict[str, Any], TranslateReason]] = [
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"tools": []}, "tools"), ({"parallel_tool_calls": False}, "tools"),
    ({"tool_choice": "auto"}, "tool_choice"), ({"tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"response_format": {"type": "text"}}, "response_format"),
    ({"structured_outputs": {"regex": "a+"}}, "structured_outputs"),
    ({"logprobs": True}, "logprobs"), ({"top_logprobs": 2}, "logprobs"),
    ({"prompt_logprobs": 1}, "logprobs"), ({"logprob_token_ids": [5]}, "logprobs"),
    ({"reasoning_effort": "low"}, "reasoning"), ({"reasoning_effort": "none"}, "reasoning"),
    ({"include_reasoning": False}, "reasoning"), ({"thinking_token_budget": 10}, "reasoning"),
    ({"stream": True, "n": 2}, "n_stream"), ({"use_beam_search": True}, "beam_search"),
    ({"echo": True}, "echo"), ({"return_prompt_text": True}, "prompt_text"),
    ({"mm_processor_kwargs": {"fps": 1}}, "multimodal"),
    ({"media_io_kwargs": {"image": {}}}, "multimodal"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "multimodal"),
    ({"add_generation_prompt": False}, "role"),
    ({"kv_transfer_params": {"prompt_token_ids": [1, 2]}}, "prompt_token_ids"),
    ({"max_tokens": None}, "max_tokens_unknown"),
    ({"n": 0}, "invalid"), ({"n": "2"}, "invalid"), ({"messages": "hi"}, "invalid"),
    ({"continue_final_message": True}, "invalid"), ({"truncate_prompt_tokens": "4"}, "invalid"),
    ({"functions": [{"name": "f"}]}, "unknown_field"), ({"metadata": {}}, "unknown_field"),
    ({"store": False}, "unknown_field"),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "reason"), REFUSALS)
def test_untranslatable_requests_raise_with_reason(
    extra: dict[str, Any], reason: TranslateReason
) -> None:
    max_model_len = None if reason == "max_tokens_unknown" else 64
    with pytest.raises(CannotTranslate) as info:
        translate(extra, max_model_len=max_model_len)
    assert info.value.reason == reason
    assert info.value.detail and reason in str(info.value)


def test_no_room_left_in_the_context_is_refused() -> None:
    for n in (64, 65):  # chat rejects both (== and > max_model_len) with its own 400
        with pytest.raises(CannotTranslate) as info:
            translate({}, ids=list(range(n)))
        assert info.value.reason == "context_length"
    with pytest.raises(CannotTranslate, match="context_length"):
        translate({"truncate_prompt_tokens": -1}, ids=list(range(64)))


def test_every_reason_is_exercised() -> None:
    covered = {reason for _, reason in REFUSALS} | {"context_length"}
    assert covered == set(get_args(TranslateReason))


def test_refusal_beats_unknown_field() -> None:
    with pytest.raises(CannotTranslate) as info:
        translate({"tools": [{"type": "function"}], "metadata": {}})
    assert info.value.reason == "tools"


# ---------------------------------------------------------------- completions streams


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


HEAD = {"id": "cmpl-abc123", "object": "text_completion", "created": 1700000000, "model": "tiny"}


def cmpl_chunk(text: str, usage: Any = None, fp: str | None = None, **choice: Any) -> Any:
    """One chunk as vLLM's completion_stream_generator serializes it (exclude_unset)."""
    part = {"index": 0, "text": text, "logprobs": None, "finish_reason": None,
            "stop_reason": None, "prompt_token_ids": None, "token_ids": None} | choice  # fmt: skip
    extra = {"usage": usage, "system_fingerprint": fp}
    return {**HEAD, "choices": [part], **{k: v for k, v in extra.items() if v is not None}}


def usage_of(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
            "completion_tokens": completion}  # fmt: skip


def cmpl_usage_chunk(prompt: int, completion: int) -> Any:
    return {**HEAD, "choices": [], "usage": usage_of(prompt, completion), "system_fingerprint": FP}


def sse(objs: list[dict[str, Any]]) -> bytes:
    return "".join(f"data: {dumps(o)}\n\n" for o in objs).encode() + b"data: [DONE]\n\n"


def run_stream(raw: bytes, pieces: list[bytes] | None = None, **kwargs: Any) -> bytes:
    t = ChatStreamTranslator(model="tiny", **{"include_usage": False, **kwargs})
    out = b"".join(t.feed(p) for p in (pieces if pieces is not None else [raw]))
    return out + t.close()


def events(out: bytes) -> list[str]:
    d = SSEDecoder()
    return [e.data for e in [*d.feed(out), *d.close()]]


GOLDEN_ROLE = (
    '{"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1700000000,'
    '"model":"tiny","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    '"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}'
)
GOLDEN_CONTENT = (
    '{"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1700000000,'
    '"model":"tiny","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,'
    '"finish_reason":null,"token_ids":null}]}'
)
GOLDEN_LAST_NO_USAGE = (
    '{"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1700000000,'
    '"model":"tiny","choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,'
    '"finish_reason":"length","stop_reason":null,"token_ids":null}],'
    '"system_fingerprint":"vllm-0.32.0-1a2b3c4d"}'
)
GOLDEN_USAGE = (
    '{"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1700000000,'
    '"model":"tiny","choices":[],"usage":{"prompt_tokens":5,"total_tokens":7,'
    '"completion_tokens":2},"system_fingerprint":"vllm-0.32.0-1a2b3c4d"}'
)


def test_stream_matches_vllm_chat_bytes_without_usage() -> None:
    raw = sse([cmpl_chunk("Hel"), cmpl_chunk("lo", finish_reason="length", fp=FP)])
    out = run_stream(raw)
    expected = [GOLDEN_ROLE, GOLDEN_CONTENT, GOLDEN_LAST_NO_USAGE]
    assert out == "".join(f"data: {e}\n\n" for e in expected).encode() + b"data: [DONE]\n\n"


def test_stream_matches_vllm_chat_bytes_with_usage() -> None:
    raw = sse([cmpl_chunk("Hel"), cmpl_chunk("lo", finish_reason="length"), cmpl_usage_chunk(5, 2)])
    last = GOLDEN_LAST_NO_USAGE.replace(',"system_fingerprint":"vllm-0.32.0-1a2b3c4d"', "")
    expected = [GOLDEN_ROLE, GOLDEN_CONTENT, last, GOLDEN_USAGE, "[DONE]"]
    assert events(run_stream(raw, include_usage=True)) == expected


def test_continuous_usage_and_token_ids_take_chat_places() -> None:
    raw = sse([cmpl_chunk("a", usage_of(5, 1), token_ids=[9], prompt_token_ids=IDS),
               cmpl_chunk("", usage_of(5, 2), finish_reason="stop", token_ids=[100265]),
               cmpl_usage_chunk(5, 2)])  # fmt: skip
    objs = [json.loads(e) for e in events(run_stream(raw, include_usage=True))[:-1]]
    role, first, last, usage = objs
    no_details = {"completion_tokens_details": None}
    assert role["usage"] == {**usage_of(5, 0), **no_details}
    assert list(role)[-3:] == ["usage", "prompt_token_ids", "prompt_text"]
    assert role["prompt_token_ids"] == IDS and "prompt_token_ids" not in first
    assert first["choices"][0]["token_ids"] == [9]
    assert first["usage"] == {**usage_of(5, 1), **no_details}
    end = last["choices"][0]
    assert end["delta"] == {"content": ""} and end["finish_reason"] == "stop"
    assert end["stop_reason"] is None
    assert usage["choices"] == [] and usage["usage"] == usage_of(5, 2)
    for obj in objs:
        ChatCompletionChunk.model_validate(obj)


def test_usage_the_client_did_not_ask_for_is_dropped_but_kept() -> None:
    raw = sse([cmpl_chunk("x", usage_of(5, 1), finish_reason="stop"), cmpl_usage_chunk(5, 1)])
    t = ChatStreamTranslator(model="tiny", include_usage=False)
    objs = [json.loads(e) for e in events(t.feed(raw) + t.close())[:-1]]
    assert [len(o["choices"]) for o in objs] == [1, 1]
    assert all("usage" not in o for o in objs)
    assert t.usage == usage_of(5, 1)


def test_upstream_errors_pass_through_unchanged() -> None:
    error = '{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}'
    raw = f"data: {error}\n\ndata: [DONE]\n\n".encode()
    assert run_stream(raw) == raw  # no role chunk before an error, as in vLLM's chat
    mid = sse([cmpl_chunk("a")]).replace(b"data: [DONE]", f"data: {error}\n\ndata: [DONE]".encode())
    assert events(run_stream(mid))[-2:] == [error, "[DONE]"]


def test_unknown_events_pass_through_and_nothing_follows_done() -> None:
    raw = b"data: not json\ndata: second line\n\ndata: [DONE]\n\ndata: {}\n\n"
    assert run_stream(raw) == b"data: not json\ndata: second line\n\ndata: [DONE]\n\n"
    odd = b'data: {"choices":[{"index":[0],"text":"x"}]}\n\n'
    assert run_stream(odd) == odd  # not a completions chunk: not guessed at


def test_close_flushes_an_unterminated_done_and_a_cut_stream_stays_cut() -> None:
    t = ChatStreamTranslator(model="tiny", include_usage=False)
    assert t.feed(b"data: [DO") == b""
    assert t.feed(b"NE]") == b""  # no line end yet: the event is still open
    assert t.close() == b"data: [DONE]\n\n"
    cut = sse([cmpl_chunk("a")]).removesuffix(b"data: [DONE]\n\n")
    assert not events(run_stream(cut))[-1].endswith("[DONE]")


def test_given_id_and_created_win_over_the_upstream() -> None:
    out = run_stream(sse([cmpl_chunk("a", finish_reason="stop")]), request_id="r1", created=5)
    for data in events(out)[:-1]:
        obj = json.loads(data)
        assert (obj["id"], obj["created"]) == ("chatcmpl-r1", 5)


def test_each_choice_index_gets_its_role_chunk() -> None:
    raw = sse([cmpl_chunk("a", index=0), cmpl_chunk("b", index=1)])
    objs = [json.loads(e) for e in events(run_stream(raw))[:-1]]
    deltas = [(o["choices"][0]["index"], o["choices"][0]["delta"]) for o in objs]
    assert deltas == [(0, {"role": "assistant", "content": ""}), (0, {"content": "a"}),
                      (1, {"role": "assistant", "content": ""}), (1, {"content": "b"})]  # fmt: skip


@st.composite
def completion_streams(draw: st.DrawFn) -> tuple[list[str], str, str | int | None, bool, bool]:
    pieces = draw(st.lists(st.text(max_size=12), min_size=1, max_size=8))
    finish = draw(st.sampled_from(["stop", "length"]))
    stop_reason = draw(st.sampled_from([None, "END", 100265])) if finish == "stop" else None
    return pieces, finish, stop_reason, draw(st.booleans()), draw(st.booleans())


def build_stream(
    pieces: list[str], finish: str, stop_reason: str | int | None, usage: bool, continuous: bool
) -> bytes:
    last = len(pieces) - 1
    chunks = [
        cmpl_chunk(text, usage_of(len(IDS), i + 1) if continuous else None,
                   None if usage or i < last else FP, finish_reason=finish if i == last else None,
                   stop_reason=stop_reason if i == last else None)
        for i, text in enumerate(pieces)
    ]  # fmt: skip
    return sse(chunks + ([cmpl_usage_chunk(len(IDS), len(pieces))] if usage else []))


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=150, deadline=None)
@given(stream=completion_streams(), cuts=st.lists(st.integers(0, 4000), max_size=25))
def test_any_chunking_yields_valid_vllm_shaped_chat_stream(
    stream: tuple[list[str], str, str | int | None, bool, bool], cuts: list[int]
) -> None:
    pieces, finish, stop_reason, usage, continuous = stream
    raw = build_stream(pieces, finish, stop_reason, usage, usage and continuous)
    out = run_stream(raw, split_at(raw, [c % (len(raw) + 1) for c in cuts]), include_usage=usage)
    assert out == run_stream(raw, include_usage=usage)  # chunk boundaries change nothing
    datas = events(out)
    assert datas[-1] == "[DONE]" and "[DONE]" not in datas[:-1]
    chunks = [ChatCompletionChunk.model_validate(json.loads(d)) for d in datas[:-1]]
    assert {(c.id, c.created, c.model) for c in chunks} == {("chatcmpl-abc123", 1700000000, "tiny")}
    with_choices = [c for c in chunks if c.choices]
    role = with_choices[0].choices[0].delta.model_dump(exclude_none=True)
    assert role == {"role": "assistant", "content": ""}
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert text == "".join(pieces)
    assert [c.choices[0].finish_reason for c in with_choices][-1] == finish
    assert all(c.choices[0].finish_reason is None for c in with_choices[:-1])
    assert (with_choices[-1].choices[0].model_extra or {})["stop_reason"] == stop_reason
    tail = [c for c in chunks if not c.choices]
    assert len(tail) == int(usage)
    if usage:
        assert tail[0].usage is not None and tail[0].usage.completion_tokens == len(pieces)
        assert tail[0].usage.prompt_tokens == len(IDS) and tail[0].system_fingerprint == FP
    else:
        assert with_choices[-1].system_fingerprint == FP
    assert all((c.usage is not None) == (usage and continuous) for c in with_choices)


# ---------------------------------------------------------------- full answers

# vLLM 0.32's CompletionResponse.model_dump() for a two-token answer (prompt caching on)
COMPLETION: dict[str, Any] = json.loads(
    '{"id": "cmpl-abc123", "object": "text_completion", "created": 1700000000, "model": "tiny", '
    '"choices": [{"index": 0, "text": "hi", "logprobs": null, "finish_reason": "stop", '
    '"stop_reason": null, "token_ids": null, "prompt_logprobs": null, "prompt_token_ids": null, '
    '"routed_experts": null}], "service_tier": null, "system_fingerprint": "vllm-0.32.0-1a2b3c4d", '
    '"usage": {"prompt_tokens": 5, "total_tokens": 7, "completion_tokens": 2, '
    '"prompt_tokens_details": {"cached_tokens": 0, "created_cache_tokens": null, '
    '"multimodal_tokens": null}, "completion_tokens_details": null}, "kv_transfer_params": null, '
    '"ec_transfer_params": null, "metrics": null}'
)

GOLDEN_CHAT = (
    '{"id": "chatcmpl-abc123", "object": "chat.completion", "created": 1700000000, '
    '"model": "tiny", "choices": [{"index": 0, "message": {"role": "assistant", '
    '"content": "hi", "refusal": null, "annotations": null, "audio": null, '
    '"function_call": null, "reasoning": null}, "logprobs": null, "finish_reason": "stop", '
    '"stop_reason": null, "token_ids": null, "routed_experts": null}], "service_tier": null, '
    '"system_fingerprint": "vllm-0.32.0-1a2b3c4d", "usage": {"prompt_tokens": 5, '
    '"total_tokens": 7, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0, '
    '"created_cache_tokens": null, "multimodal_tokens": null}, '
    '"completion_tokens_details": null}, "prompt_logprobs": null, "prompt_token_ids": null, '
    '"prompt_text": null, "kv_transfer_params": null, "ec_transfer_params": null, '
    '"metrics": null}'
)


def test_full_answer_matches_vllm_chat_model_dump() -> None:
    out = chat_response(COMPLETION, model="tiny")
    assert json.dumps(out) == GOLDEN_CHAT
    parsed = ChatCompletion.model_validate(out)
    assert parsed.choices[0].message.content == "hi"
    assert parsed.usage is not None and parsed.usage.prompt_tokens == 5


def test_full_answer_with_token_ids_n_and_minimal_usage() -> None:
    choices = [
        {"index": i, "text": t, "finish_reason": f, "stop_reason": s,
         "token_ids": [i], "prompt_token_ids": IDS}
        for i, (t, f, s) in enumerate([("a", "length", None), ("b", None, "END")])
    ]  # fmt: skip
    completion = {"id": "x", "created": 3, "choices": choices, "usage": usage_of(5, 2)}
    out = chat_response(completion, model="alias")
    assert (out["id"], out["model"], out["prompt_token_ids"]) == ("chatcmpl-x", "alias", IDS)
    assert [c["finish_reason"] for c in out["choices"]] == ["length", "stop"]
    assert [c["stop_reason"] for c in out["choices"]] == [None, "END"]
    assert [c["token_ids"] for c in out["choices"]] == [[0], [1]]
    assert out["usage"] == {**usage_of(5, 2), "prompt_tokens_details": None,
                            "completion_tokens_details": None}  # fmt: skip
    assert "tool_calls" not in out["choices"][0]["message"]  # vLLM drops an empty list
    ChatCompletion.model_validate(out)


def test_full_answer_error_bodies_pass_through() -> None:
    error = {"error": {"message": "bad", "type": "BadRequestError", "param": None, "code": 400}}
    assert chat_response(error, model="tiny") == error
