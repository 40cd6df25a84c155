"""Folding events: whatever JSON (or not) a server streams ends as data or our failure."""

from __future__ import annotations

import json

import pytest

from ttftscope.client.events import EventFold, fold_chunk, fold_end, on_event
from ttftscope.client.sse import SSEDecoder, SSEEvent
from ttftscope.errors import FailureKind

URL = "http://h/v1/chat/completions"
DEEP = [
    pytest.param("[" * 1_000 + "]" * 1_000, id="1000-deep-list"),
    pytest.param('{"a":' * 1_000 + "1" + "}" * 1_000, id="1000-deep-object"),
    pytest.param("[" * 100_000, id="100000-deep-unclosed"),
]


def fold(*data: str) -> EventFold:
    f = EventFold(url=URL)
    decoder = SSEDecoder()
    for d in data:
        if not fold_chunk(decoder, f"data: {d}\n\n".encode(), f):
            break
    else:
        fold_end(decoder, f)
    return f


def chunk(**fields: object) -> str:
    return json.dumps({"model": "m", "choices": [], **fields}, ensure_ascii=True)


def assert_stream_error(f: EventFold, needle: str) -> None:
    assert f.failure is not None
    assert f.failure.kind is FailureKind.STREAM_ERROR
    assert f.failure.message.startswith(f"{URL} sent an event that is {needle}: ")
    assert f.failure.hint is not None and "OpenAI-compatible" in f.failure.hint


@pytest.mark.parametrize("data", DEEP)
def test_deeply_nested_event_is_a_stream_error(data: str) -> None:
    f = fold(chunk(), data, "[DONE]")
    assert_stream_error(f, "JSON nested too deeply to read")
    assert f.events == 2 and not f.done  # reading stopped at the bad event


def test_event_with_a_4300_digit_integer_is_a_stream_error() -> None:
    usage = '{"usage": {"prompt_tokens": ' + "7" * 4_301 + "}}"
    f = fold(usage)
    assert_stream_error(f, "JSON with a number too long to read (over 4,300 digits)")


def test_event_that_is_not_json_keeps_its_message() -> None:
    assert_stream_error(fold("<html>"), "not JSON")


def test_lone_surrogates_in_chunks_become_replacement_characters() -> None:
    delta = {"index": 0, "delta": {"content": "a\ud800b"}, "finish_reason": "st\udfffop"}
    f = fold(chunk(model="m\ud83d", choices=[delta]), "[DONE]")
    assert f.failure is None and f.done
    assert (f.text, f.model, f.finish_reason) == (["a\ufffdb"], "m\ufffd", "st\ufffdop")


def test_mid_stream_error_with_odd_message_is_readable() -> None:
    for message, shown in [
        ("KV \ud800 gone", "KV \ufffd gone"),
        ({"code": 3}, '{"code": 3}'),
        (None, "(no message)"),
        ("x" * 5_000, "x" * 999 + "…"),
    ]:
        f = fold(chunk(error={"message": message} if message is not None else None))
        assert f.failure is not None and f.failure.kind is FailureKind.STREAM_ERROR
        assert f.failure.message == f"{URL} reported an error mid-stream: {shown}"


@pytest.mark.parametrize("count", [-1, 2**63, 10**4_000, True, 1.5, "12"])
def test_usage_counts_that_are_no_counts_are_dropped(count: object) -> None:
    usage = {"prompt_tokens": count, "completion_tokens": 3}
    f = fold(chunk(usage=usage), "[DONE]")
    assert f.failure is None and (f.prompt_tokens, f.completion_tokens) == (None, 3)


def test_unparsed_events_after_a_failure_are_not_folded() -> None:
    f = EventFold(url=URL)
    raw = b'data: {"error": "boom"}\n\ndata: {"choices": [{"text": "late"}]}\n\n'
    assert fold_chunk(SSEDecoder(), raw, f) is False
    assert f.text == [] and f.events == 1


def test_an_event_without_a_byte_stamp_still_gets_its_first_event_time() -> None:
    f = EventFold(url=URL)
    assert on_event(SSEEvent(data="[DONE]"), f) and f.done
    assert "first_event" in f.stamps


@pytest.mark.parametrize(
    ("api", "events"),
    [
        (
            "chat",
            [
                {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
                {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
            ],
        ),
        (
            "messages",
            [
                {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
            ],
        ),
    ],
)
def test_a_whole_answer_in_one_chunk_has_its_first_token_no_later_than_its_last_byte(
    api: str, events: list[dict[str, object]]
) -> None:
    # a short answer arrives in one network chunk: its first token came with it
    chunk = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    fold = EventFold(url="u", api=api)  # type: ignore[arg-type]
    assert fold_chunk(SSEDecoder(), chunk, fold)
    assert fold.stamps["first_content"] == fold.stamps["last_byte"]
