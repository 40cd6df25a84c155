from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.client.sse import SSEDecoder, SSEEvent


def feed_all(chunks: list[bytes]) -> tuple[list[SSEEvent], SSEDecoder]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(d.feed(c))
    out.extend(d.close())
    return out, d


def test_openai_style_stream() -> None:
    raw = (
        b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
        b"data: [DONE]\n\n"
    )
    events, _ = feed_all([raw])
    assert [e.data[:12] for e in events] == ['{"choices":[', '{"choices":[', "[DONE]"]
    assert [e.is_done for e in events] == [False, False, True]


def test_multiline_data_event_id_and_comments() -> None:
    raw = b": hello\nid: 7\nevent: delta\ndata: a\ndata:b\ndata:  c\n\n: bye\ndata: x\n\n"
    events, d = feed_all([raw])
    assert events == [
        SSEEvent(event="delta", data="a\nb\n c", id="7"),
        SSEEvent(event="message", data="x", id="7"),  # id is sticky, event type is not
    ]
    assert d.comments == 2


def test_all_line_endings_and_blank_lines_without_data() -> None:
    raw = b"\r\n\n\rdata: 1\r\rdata: 2\r\n\r\ndata: 3\n\nevent: lonely\n\n"
    events, _ = feed_all([raw])
    assert [e.data for e in events] == ["1", "2", "3"]


def test_cr_at_chunk_end_followed_by_lf_is_one_line_end() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\r") == []
    # The \n that completes \r\n must not be taken for the blank line that ends the event.
    assert d.feed(b"\n") == []
    assert d.feed(b"data: b\r") == []
    assert d.feed(b"\r") == [SSEEvent(data="a\nb")]


def test_cr_at_chunk_end_then_blank_line() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\r") == []
    assert d.feed(b"\r\n") == [SSEEvent(data="a")]


def test_utf8_split_across_chunks() -> None:
    raw = "data: héllo €𝄞\n\n".encode()
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    events, _ = feed_all(chunks)
    assert events == [SSEEvent(data="héllo €𝄞")]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    events, _ = feed_all([b"data: \xff\xfe ok\n\n"])
    assert events[0].data.endswith(" ok")
    assert "\ufffd" in events[0].data


def test_bom_is_stripped_once_and_field_without_colon() -> None:
    events, _ = feed_all([b"\xef\xbb\xbfdata\n\ndata: \xef\xbb\xbfz\n\n"])
    assert events == [SSEEvent(data=""), SSEEvent(data="\ufeffz")]


def test_retry_and_unknown_fields() -> None:
    events, d = feed_all([b"retry: 1500\nretry: x\nfoo: bar\ndata: q\n\n"])
    assert d.retry_ms == 1500
    assert events == [SSEEvent(data="q")]


def test_close_flushes_unterminated_event() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: [DONE]") == []
    assert d.close() == [SSEEvent(data="[DONE]")]
    assert d.close() == []


# --- property: chunking never changes the decoded events ---------------------------------

_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\0"),
    max_size=20,
)
_newline = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    lines: list[str] = []
    expected: list[SSEEvent] = []
    last_id: str | None = None
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            lines.append(":" + draw(_text))
        event_type = draw(st.one_of(st.none(), _text.filter(lambda s: s != "")))
        if event_type is not None:
            lines.append(f"event: {event_type}")
        if draw(st.booleans()):
            last_id = draw(_text)
            lines.append(f"id: {last_id}")
        data = draw(st.lists(_text, min_size=1, max_size=4))
        lines.extend(f"data: {line}" for line in data)
        lines.append("")
        expected.append(SSEEvent(event=event_type or "message", data="\n".join(data), id=last_id))
    out: list[str] = []
    prev = ""
    for line in lines:
        # "\r" then an empty line ended by "\n" would read as one "\r\n": not what we meant.
        merges = prev == "\r" and not line
        prev = draw(st.sampled_from(["\r\n", "\r"]) if merges else _newline)
        out.append(line + prev)
    return "".join(out).encode(), expected


@settings(max_examples=300, deadline=None)
@given(stream=sse_streams(), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_decodes_like_the_whole(
    stream: tuple[bytes, list[SSEEvent]], cuts: list[int]
) -> None:
    raw, expected = stream
    bounds = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    whole, _ = feed_all([raw])
    assert whole == expected
    assert feed_all(chunks)[0] == whole


def test_retry_too_long_for_int_is_ignored() -> None:
    # int() refuses more than 4,300 digits: the decoder must not pass that on.
    events, d = feed_all([b"retry: " + b"9" * 5_000 + b"\ndata: q\n\nretry: 20\n\n"])
    assert events == [SSEEvent(data="q")]
    assert d.retry_ms == 20
