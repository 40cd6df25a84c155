"""Fuzz: no answer a server sends makes the streaming client raise; each is ours, classified.

Random bytes, random OpenAI-ish chunk streams (every slot may hold any JSON, surrogate
escapes, huge numbers, deep nesting) and random error answers go through the real
:func:`~ttftscope.client.stream.stream_completion` (an httpx mock transport stands in for the
socket), so SSE decoding and event folding run exactly as they do against a server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope import errors
from ttftscope.client.stream import StreamResult, raise_for_result, stream_completion
from ttftscope.errors import FailureKind
from ttftscope.records import RequestRecord, record_line

KEY = "sk-fuzz-SECRET-0123456789"
URL = "http://fuzz.invalid/v1"


def run(status: int, content_type: str, chunks: list[bytes]) -> StreamResult:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": content_type} if content_type else {}
        return httpx.Response(status, headers=headers, content=body())

    async def go() -> StreamResult:
        transport = httpx.MockTransport(handler)
        async with httpx.AsyncClient(transport=transport, trust_env=False) as c:
            return await stream_completion(
                c,
                base_url=URL,
                path="/chat/completions",
                body={"model": "m", "messages": []},
                api_key=KEY,
                timeout_s=5,
            )

    return asyncio.run(go())


def check(r: StreamResult) -> None:
    """Success, or our failure: a kind, a message, our exception, and a recordable result."""
    assert r.ok is (r.error_kind is None)
    if r.ok:
        assert r.status == 200 and r.error is None
        raise_for_result(r)
    else:
        assert isinstance(r.error_kind, FailureKind) and r.error
        with pytest.raises(errors.ServerRequestError):
            raise_for_result(r)
    r.model_dump_json()  # the result serializes: no lone surrogates anywhere in it
    rec = RequestRecord(
        run_id="f",
        index=0,
        variant="chat",
        phase="cold",
        ok=r.ok,
        status=r.status,
        error_kind=r.error_kind,
        error=r.error,
        retry_after=r.retry_after,
        model=r.model,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
    )
    line = record_line(rec)
    assert line.splitlines() == [line] and RequestRecord.model_validate_json(line) == rec


def what_it_said(r: StreamResult) -> tuple[object, ...]:
    """Everything but the clock: the same bytes must say the same whatever their chunking."""
    return (
        r.ok,
        r.status,
        r.error_kind,
        r.error,
        r.text,
        r.events,
        r.content_events,
        r.model,
        r.prompt_tokens,
        r.completion_tokens,
        r.cached_tokens,
        r.finish_reason,
    )


def cut(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


# --- strategies ---------------------------------------------------------------------------

# Not st.text() alone: it almost never draws surrogates, and "\ud800" escapes are what
# servers really send.
_ODD = st.sampled_from("\ud800\udfff\ud83d\u2028\x85\0\r\n")
TEXT = st.one_of(st.text(max_size=12), st.tuples(st.text(max_size=8), _ODD).map("".join))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


def often(draw: st.DrawFn, plausible: st.SearchStrategy[Any], tenth: int = 8) -> Any:
    """Mostly (``tenth`` in 10) a plausible value, otherwise any JSON at all."""
    return draw(plausible) if draw(st.integers(0, 9)) < tenth else draw(JSON_VALUES)


@st.composite
def choices(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"index": often(draw, st.just(0), 9)}
    if draw(st.booleans()):
        content = often(draw, TEXT)
        out["delta"] = often(draw, st.just({"content": content} if content else {}))
    else:
        out["text"] = often(draw, TEXT)
    if draw(st.booleans()):
        out["reasoning_content"] = often(draw, TEXT)
    out["finish_reason"] = often(draw, st.sampled_from([None, None, None, "stop", "length"]))
    return out


@st.composite
def chunks(draw: st.DrawFn) -> dict[str, Any]:
    """A chat or completions chunk, sometimes with any JSON in any slot."""
    out: dict[str, Any] = {"id": "cmpl-1", "object": "chat.completion.chunk"}
    if draw(st.integers(0, 9)) == 0:
        out["object"] = often(draw, st.just("error"), 5)
    out["model"] = often(draw, st.sampled_from(["tiny-llama", ""]) | TEXT)
    out["choices"] = often(draw, st.lists(choices(), max_size=3), 9)
    if draw(st.integers(0, 4)) == 0:
        usage = {"prompt_tokens": st.integers(), "completion_tokens": st.integers()}
        out["usage"] = often(draw, st.fixed_dictionaries(usage))
    if draw(st.integers(0, 9)) == 0:
        out["error"] = often(draw, st.fixed_dictionaries({"message": TEXT}), 5)
    return out


# What json.loads refuses although it looks like JSON: too deep, too many digits.
MONSTERS = st.sampled_from(
    [
        b"[" * 1_200 + b"]" * 1_200,
        b'{"a":' * 1_200 + b"0" + b"}" * 1_200,
        b'{"usage": {"prompt_tokens": ' + b"9" * 4_400 + b"}}",
        b'{"error": {"message": ' + b"[" * 1_100 + b"]" * 1_100 + b"}}",
        b"1e999999",
        b"NaN",
        b'"\\ud800"',
        b'{"model": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8: not UTF-8
    ]
)


@st.composite
def json_payloads(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 19)) == 0:
        return draw(MONSTERS)
    obj = draw(chunks()) if draw(st.integers(0, 9)) else draw(JSON_VALUES)
    if draw(st.booleans()):  # lone surrogates as "\ud800" escapes, as a server would send
        return json.dumps(obj, ensure_ascii=True).encode()
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def chunk_streams(draw: st.DrawFn) -> bytes:
    parts: list[bytes] = []
    for payload in draw(st.lists(json_payloads(), max_size=6)):
        if draw(st.integers(0, 5)) == 0:
            parts.append(b": keep-alive\r\n")
        newline = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
        parts.append(b"data: " + payload + newline + newline)
    if draw(st.booleans()):
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


SSE_TOKENS = st.sampled_from(
    [b"data: ", b"data:", b"\n", b"\r\n", b"\r", b"\n\n", b": c\n", b"event: error\n",
     b"id: \x00\n", b"retry: 99999999999999999999\n", b"data: [DONE]\n\n", b"\xef\xbb\xbf",
     b"{", b"}", b'"', b"\\u", b"\xf0\x9f", b"\xed\xa0\x80", b"\xff", b'{"choices":[']
)  # fmt: skip
RAW_STREAMS = st.lists(st.one_of(st.binary(max_size=12), SSE_TOKENS), max_size=40).map(b"".join)
CUTS = st.lists(st.integers(0, 100_000), max_size=10)
SSE = "text/event-stream"


@settings(max_examples=250, deadline=None)
@given(raw=RAW_STREAMS, cuts=CUTS)
def test_random_bytes_as_a_stream(raw: bytes, cuts: list[int]) -> None:
    whole = run(200, SSE, [raw])
    chunked = run(200, SSE, cut(raw, cuts))
    check(whole)
    check(chunked)
    assert what_it_said(chunked) == what_it_said(whole)


@settings(max_examples=300, deadline=None)
@given(raw=chunk_streams(), cuts=CUTS)
def test_openai_like_chunk_streams(raw: bytes, cuts: list[int]) -> None:
    whole = run(200, SSE, [raw])
    chunked = run(200, SSE, cut(raw, cuts))
    check(whole)
    check(chunked)
    assert what_it_said(chunked) == what_it_said(whole)


@settings(max_examples=200, deadline=None)
@given(
    status=st.one_of(
        st.sampled_from([200, 201, 400, 401, 404, 429, 500, 503]), st.integers(100, 599)
    ),
    content_type=st.sampled_from(
        ["application/json", SSE, "text/html", "", "text/plain; charset=utf-8", "application/x"]
    ),
    body=st.one_of(json_payloads(), RAW_STREAMS, chunk_streams()),
    cuts=CUTS,
)
def test_any_status_type_and_body(
    status: int, content_type: str, body: bytes, cuts: list[int]
) -> None:
    r = run(status, content_type, cut(body, cuts))
    check(r)
    if status != 200:
        assert not r.ok and r.status == status
