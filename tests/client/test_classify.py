"""Error bodies of any shape become a classified failure with a readable message."""

from __future__ import annotations

import json

import pytest

from ttftscope.client.classify import classify_status, not_an_api, server_text
from ttftscope.errors import FailureKind

URL = "http://h/v1/chat/completions"
JSON_CT = {"content-type": "application/json"}


def error_body(message: object) -> bytes:
    return json.dumps({"error": {"message": message, "code": 500}}).encode()


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        pytest.param(
            b"[" * 1_000 + b"]" * 1_000, "(JSON nested too deeply to read) [[[", id="deep"
        ),
        pytest.param(b"[" * 100_000, "(JSON nested too deeply to read) [[[", id="unclosed"),
        pytest.param(
            b'{"error": ' + b"9" * 4_301 + b"}",
            "(JSON with a number too long to read (over 4,300 digits)) {",
            id="4301-digits",
        ),
        pytest.param(b"upstream \xff\xfe timeout", "upstream \ufffd\ufffd timeout", id="not-utf8"),
    ],
)
def test_unreadable_error_body_keeps_the_status_kind(body: bytes, shown: str) -> None:
    f = classify_status(500, JSON_CT, body, URL)
    assert f.kind is FailureKind.SERVER_ERROR and f.status == 500
    assert f.message.startswith(f"{URL} failed with HTTP 500: {shown}")
    assert len(f.message) < 400


def test_lone_surrogate_in_an_error_message_is_replaced() -> None:
    # json.dumps writes the lone surrogate as the escape "\ud800", as a server would.
    f = classify_status(500, JSON_CT, error_body("engine \ud800 dead"), URL)
    assert f.message == f"{URL} failed with HTTP 500: engine \ufffd dead"
    f.message.encode("utf-8")  # printable and recordable
    raw = b'{"detail": "bad \xed\xa0\x80 bytes"}'  # a UTF-8-encoded surrogate: also not text
    said = classify_status(400, JSON_CT, raw, URL).message
    assert said.endswith("bad \ufffd bytes")


def test_line_separators_in_an_error_message_are_kept() -> None:
    f = classify_status(500, JSON_CT, error_body("line\u2028two"), URL)
    assert f.message.endswith(": line\u2028two")


def test_deep_json_answer_instead_of_a_stream_is_a_bad_response() -> None:
    f = not_an_api("application/json", b"[" * 100_000, URL)
    assert f.kind is FailureKind.BAD_RESPONSE
    assert "a JSON answer instead of an event stream: (JSON nested too deeply to read)" in (
        f.message
    )
    assert f.hint is not None and "OpenAI-compatible" in f.hint


def test_server_text_of_any_value() -> None:
    deep: object = "bottom"
    for _ in range(100_000):  # deeper than any stack: built in Python, not parsed
        deep = [deep]
    assert server_text(deep) == "(a list nested too deeply to show)"
    assert server_text({"b": "\ud800"}) == '{"b": "\ufffd"}'
    assert server_text("é" * 3, limit=2) == "é…"
    assert server_text(float("nan")) == "NaN"
