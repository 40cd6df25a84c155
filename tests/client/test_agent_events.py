"""Anthropic Messages and OpenAI Responses streams fold as chat's do, however they are cut.

The streams are hand-written SSE bytes in the shape vLLM 0.32 sends (bookkeeping events
first, content deltas, usage at the end) and are fed in every two-piece split, so an event,
a JSON string and a multi-byte character are cut in the middle at some point.
"""

from __future__ import annotations

import json

import pytest

from ttftscope.client.apis import Api
from ttftscope.client.events import fold_chunk, fold_end
from ttftscope.client.sse import SSEDecoder
from ttftscope.client.stream import StreamResult, StreamRun
from ttftscope.errors import FailureKind


def _sse(*events: dict[str, object]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
        for e in events
    )


MESSAGE_START: dict[str, object] = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "model": "tiny",
        "content": [],
        "usage": {"input_tokens": 31, "cache_read_input_tokens": 96, "output_tokens": 0},
    },
}
BLOCK_START: dict[str, object] = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}
MESSAGES = _sse(
    MESSAGE_START,
    BLOCK_START,
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Grüße"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " ok"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"path": "a.py"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use"},
        "usage": {"input_tokens": 31, "cache_read_input_tokens": 96, "output_tokens": 5},
    },
    {"type": "message_stop"},
)
CREATED: dict[str, object] = {
    "type": "response.created",
    "sequence_number": 0,
    "response": {"id": "r1", "model": "tiny", "status": "in_progress", "usage": None},
}
RESPONSES = _sse(
    CREATED,
    {"type": "response.in_progress", "sequence_number": 1, "response": {"id": "r1"}},
    {"type": "response.output_item.added", "item": {"type": "message", "content": []}},
    {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}},
    {"type": "response.output_text.delta", "delta": "Grüße", "item_id": "m1"},
    {"type": "response.output_text.delta", "delta": " ok", "item_id": "m1"},
    {"type": "response.output_text.done", "text": "Grüße ok"},
    {"type": "response.function_call_arguments.delta", "delta": '{"cmd": "ls"}'},
    {
        "type": "response.completed",
        "response": {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {
                "input_tokens": 127,
                "input_tokens_details": {"cached_tokens": 96},
                "output_tokens": 5,
            },
        },
    },
)
STREAMS: dict[Api, bytes] = {"messages": MESSAGES, "responses": RESPONSES}


def _fold(api: Api, pieces: list[bytes]) -> tuple[StreamResult, StreamRun]:
    run = StreamRun(url="http://h/v1", api=api, secrets=[])
    run.start()
    run.status = 200
    decoder = SSEDecoder()
    for piece in pieces:
        if not fold_chunk(decoder, piece, run):
            break
    else:
        fold_end(decoder, run)
    return run.result(), run


def _splits(data: bytes) -> list[list[bytes]]:
    return [[data[:i], data[i:]] for i in range(1, len(data))]


@pytest.mark.parametrize(
    ("api", "usage", "finish"),
    [("messages", (127, 5, 96), "tool_use"), ("responses", (127, 5, 96), "max_output_tokens")],
)
def test_a_stream_folds_the_same_in_every_split(
    api: Api, usage: tuple[int, int, int], finish: str
) -> None:
    whole, _ = _fold(api, [STREAMS[api]])
    assert whole.ok and whole.text == "Grüße ok" and whole.model == "tiny"
    assert (whole.prompt_tokens, whole.completion_tokens, whole.cached_tokens) == usage
    assert whole.finish_reason == finish
    assert whole.content_events == 3  # two text deltas and the tool call's arguments
    view = whole.model_dump(exclude={"phases", "t0_wall"})
    for pieces in _splits(STREAMS[api]):
        part, _ = _fold(api, pieces)
        assert part.model_dump(exclude={"phases", "t0_wall"}) == view, pieces[0][-40:]


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_ttft_is_the_first_content_delta_not_the_first_event(api: Api) -> None:
    data = STREAMS[api]
    framing = data[: data.rindex(b"event:", 0, data.index("Grüße".encode()))]
    _, run = _fold(api, [framing])
    assert run.events >= 2 and "first_event" in run.stamps
    assert "first_content" not in run.stamps  # start, block start, created, added: framing
    _, run = _fold(api, [framing, data[len(framing) :]])
    assert run.stamps["first_event"] <= run.stamps["first_content"]


@pytest.mark.parametrize(
    ("api", "event"),
    [
        ("messages", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        ("responses", {"type": "error", "code": "server_error", "message": "busy"}),
        ("responses", {"type": "response.failed", "response": {"error": {"message": "busy"}}}),
    ],
)
def test_an_error_event_is_a_stream_error(api: Api, event: dict[str, object]) -> None:
    start = MESSAGE_START if api == "messages" else CREATED
    result, _ = _fold(api, [_sse(start, event)])
    assert not result.ok and result.error_kind is FailureKind.STREAM_ERROR
    assert result.error == "http://h/v1 reported an error mid-stream: busy"


@pytest.mark.parametrize(("api", "end"), [("messages", "message_stop"), ("responses", "completed")])
def test_a_stream_cut_before_its_end_event_says_which_event_is_missing(api: Api, end: str) -> None:
    data = STREAMS[api]
    result, _ = _fold(api, [data[: data.rindex(b"event:")]])
    assert not result.ok and result.error_kind is FailureKind.STREAM_ERROR
    assert end in (result.error or "")


def test_empty_deltas_and_signatures_are_not_content() -> None:
    stream = _sse(
        MESSAGE_START,
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": ""}},
        {"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": "x"}},
        {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "message_stop"},
    )
    result, run = _fold("messages", [stream])
    assert result.ok and result.content_events == 1 and result.text == ""  # thinking only
    assert "first_content" in run.stamps
