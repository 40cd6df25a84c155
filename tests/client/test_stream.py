from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope import errors
from ttftscope.client.stream import StreamResult, encode_body, raise_for_result, stream_completion
from ttftscope.config.redact import redact
from ttftscope.records import RecordWriter, RequestRecord, read_records

KEY = "sk-test-SECRET-4242"
CHAT: dict[str, object] = {"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION: dict[str, object] = {"model": "tiny-llama", "prompt": [1, 2, 3], "max_tokens": 3}


@pytest.fixture(scope="module")
def srv() -> Iterator[FaultServer]:
    with FaultServer() as s:
        yield s


def run(
    base_url: str,
    path: Any = "/chat/completions",
    body: dict[str, object] | None = None,
    *,
    timeout_s: float = 5.0,
    repeat: int = 1,
    **kw: Any,
) -> list[StreamResult]:
    async def go() -> list[StreamResult]:
        async with httpx.AsyncClient(trust_env=False) as c:
            return [
                await stream_completion(
                    c,
                    base_url=base_url,
                    path=path,
                    body=body or CHAT,
                    api_key=KEY,
                    timeout_s=timeout_s,
                    **kw,
                )
                for _ in range(repeat)
            ]

    return asyncio.run(go())


def assert_phase_order(r: StreamResult) -> None:
    p = r.phases
    seq = [
        p.connect_ms,
        p.request_sent_ms,
        p.headers_ms,
        p.first_event_ms,
        p.first_content_ms,
        p.last_byte_ms,
    ]
    present = [x for x in seq if x is not None]
    assert present == sorted(present), p
    assert all(x >= 0 for x in present)


def test_normal_chat_stream(srv: FaultServer) -> None:
    first, second = run(srv.base_url(), repeat=2)
    for r in (first, second):
        assert r.ok, r.error
        assert (r.status, r.error_kind, r.error) == (200, None, None)
        assert r.text == "Hello wörld"
        assert r.content_events == 3
        assert r.events == 6  # role, 3 content, usage, [DONE]
        assert r.finish_reason == "stop"
        assert (r.model, r.prompt_tokens, r.completion_tokens, r.cached_tokens) == (
            "tiny-llama",
            11,
            3,
            8,
        )
        assert r.ttft_ms == r.phases.first_content_ms
        assert_phase_order(r)
        assert None not in (r.phases.request_sent_ms, r.phases.headers_ms, r.phases.last_byte_ms)
        assert r.serialize_ms >= 0
        assert r.t0_wall > 0
    assert first.phases.connect_ms is not None and not first.reused_connection
    assert second.phases.connect_ms is None and second.reused_connection


def test_completions_stream_and_what_was_sent(srv: FaultServer) -> None:
    (r,) = run(srv.base_url(), "/completions", COMPLETION)
    assert r.ok and r.text == "Hello wörld" and r.content_events == 3
    sent = srv.last_request
    assert sent.path.endswith("/v1/completions")
    assert sent.json() == {**COMPLETION, "stream": True, "stream_options": {"include_usage": True}}
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert r.request_bytes == len(sent.body) == len(encode_body(COMPLETION))


def test_encode_body_keeps_caller_stream_options() -> None:
    raw = encode_body(
        {"model": "m", "stream": False, "stream_options": {"continuous_usage_stats": True}}
    )
    assert json.loads(raw) == {
        "model": "m",
        "stream": True,
        "stream_options": {"continuous_usage_stats": True, "include_usage": True},
    }


def test_prebuilt_body_bytes_sent_verbatim_and_extra_headers(srv: FaultServer) -> None:
    raw = encode_body(CHAT)
    (r,) = run(srv.base_url(), body_bytes=raw, headers={"X-Trace": "t1"})
    assert r.ok and r.serialize_ms == 0.0
    assert srv.last_request.body == raw
    assert srv.last_request.headers["x-trace"] == "t1"


def test_odd_byte_chunks_decode_the_same(srv: FaultServer) -> None:
    (r,) = run(srv.base_url("odd_chunks"))
    assert r.ok, r.error
    assert r.text == "Hello wörld" and r.content_events == 3 and r.cached_tokens == 8


def test_role_only_chunk_is_not_content() -> None:
    delay = 0.3
    with FaultServer(FaultOptions(first_content_delay_s=delay)) as s:
        (r,) = run(s.base_url())
    assert r.ok
    p = r.phases
    assert p.first_event_ms is not None and p.first_content_ms is not None
    assert p.first_content_ms - p.first_event_ms >= 0.8 * delay * 1000
    assert_phase_order(r)


def test_slow_headers_show_in_headers_ms() -> None:
    delay = 0.3
    with FaultServer(FaultOptions(header_delay_s=delay)) as s:
        (r,) = run(s.base_url("slow_headers"))
    assert r.ok
    p = r.phases
    assert p.headers_ms is not None and p.request_sent_ms is not None
    assert p.headers_ms - p.request_sent_ms >= 0.8 * delay * 1000
    assert p.first_content_ms is not None and p.first_content_ms - p.headers_ms < delay * 1000
    assert_phase_order(r)


STATUS_FAULTS = [
    # scenario, body, kind, exception, status, text the message must contain
    ("rate_limited", CHAT, "rate_limited", errors.RateLimited, 429, "Retry-After: 7"),
    ("server_error", CHAT, "server_error", errors.ServerError, 500, "engine dead"),
    ("unauthorized", CHAT, "auth_error", errors.AuthError, 401, "Incorrect API key"),
    (
        "normal",
        {**CHAT, "model": "nope"},
        "not_found",
        errors.ModelNotFound,
        404,
        "The model `nope` does not exist.",
    ),
    (
        "html",
        CHAT,
        "bad_response",
        errors.BadResponse,
        200,
        "not an OpenAI-compatible API: got text/html from",
    ),
    ("drop", CHAT, "stream_error", errors.StreamBroken, 200, "dropped mid-stream after 2 events"),
    ("truncated", CHAT, "stream_error", errors.StreamBroken, 200, "without [DONE]"),
    ("stream_error", CHAT, "stream_error", errors.StreamBroken, 200, "out of KV cache blocks"),
]


@pytest.mark.parametrize(("scenario", "body", "kind", "exc", "status", "needle"), STATUS_FAULTS)
def test_faults_are_classified(
    srv: FaultServer,
    scenario: str,
    body: dict[str, object],
    kind: str,
    exc: type[errors.ServerRequestError],
    status: int,
    needle: str,
) -> None:
    (r,) = run(srv.base_url(scenario), body=body)
    assert not r.ok
    assert (r.error_kind, r.status) == (kind, status)
    assert r.error is not None and needle in r.error
    assert KEY not in r.error and KEY not in (r.error_hint or "")
    with pytest.raises(exc) as info:
        raise_for_result(r)
    assert info.value.exit_code == exc.exit_code
    assert KEY not in str(info.value)
    if kind == "rate_limited":
        assert r.retry_after == "7"
        assert isinstance(info.value, errors.RateLimited) and info.value.retry_after == "7"


def test_server_echo_of_key_is_redacted(srv: FaultServer) -> None:
    (r,) = run(srv.base_url("unauthorized"))
    assert r.error is not None and KEY not in r.error
    assert f"Incorrect API key provided: {redact(KEY)}" in r.error
    assert srv.last_request.headers["authorization"] == f"Bearer {KEY}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused() -> None:
    (r,) = run(f"http://127.0.0.1:{free_port()}/v1")
    assert (r.ok, r.error_kind, r.status) == (False, "connection_refused", None)
    assert "check base_url" in (r.error_hint or "")
    with pytest.raises(errors.ServerUnreachable) as info:
        raise_for_result(r)
    assert info.value.kind == "connection_refused" and info.value.exit_code == 4


def test_tls_error_against_plain_http(srv: FaultServer) -> None:
    (r,) = run(srv.base_url().replace("http://", "https://"))
    assert r.error_kind == "tls_error"
    assert "http://" in (r.error_hint or "")


def test_timeout_before_headers() -> None:
    with FaultServer(FaultOptions(header_delay_s=1.0)) as s:
        (r,) = run(s.base_url("slow_headers"), timeout_s=0.2)
    assert r.error_kind == "timeout" and "0.2 s" in (r.error or "")
    with pytest.raises(errors.RequestTimeout):
        raise_for_result(r)


def test_timeout_mid_stream() -> None:
    with FaultServer(FaultOptions(first_content_delay_s=1.0)) as s:
        (r,) = run(s.base_url(), timeout_s=0.2)
    assert r.error_kind == "timeout" and "mid-stream" in (r.error or "")
    assert r.phases.first_event_ms is not None and r.phases.first_content_ms is None


def test_dns_failure(unresolvable: str) -> None:
    async def go() -> StreamResult:
        async with httpx.AsyncClient(trust_env=False) as c:
            return await stream_completion(
                c,
                base_url=f"http://{unresolvable}/v1",
                path="/chat/completions",
                body=CHAT,
                api_key=KEY,
                timeout_s=1,
            )

    r = asyncio.run(go())
    assert r.error_kind == "dns_failure" and "no-such-host.invalid" in (r.error or "")
    assert not r.reused_connection


def test_ok_result_does_not_raise(srv: FaultServer) -> None:
    (r,) = run(srv.base_url())
    raise_for_result(r)  # must not raise
    assert r.ok


# --- answers no real server should send: each ends as our failure, and records survive ----


def mock_run(status: int, content_type: str, parts: list[bytes]) -> StreamResult:
    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type}, content=body())

    async def go() -> StreamResult:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            return await stream_completion(
                c,
                base_url="http://h/v1",
                path="/chat/completions",
                body=CHAT,
                api_key=KEY,
                timeout_s=5,
            )

    return asyncio.run(go())


def record_round_trip(r: StreamResult, path: Path) -> RequestRecord:
    rec = RequestRecord(
        run_id="r",
        index=0,
        variant="chat",
        phase="cold",
        ok=r.ok,
        status=r.status,
        error_kind=r.error_kind,
        error=r.error,
        model=r.model,
    )
    with RecordWriter(path) as w:
        w.write(rec)
    (back,) = read_records(path)
    return back


def test_error_text_with_line_separators_survives_the_record_file(tmp_path: Path) -> None:
    body = json.dumps({"error": {"message": "line\u2028two\u2029three\x85four"}}).encode()
    r = mock_run(500, "application/json", [body])
    assert (r.error_kind, r.status) == ("server_error", 500)
    back = record_round_trip(r, tmp_path / "r.jsonl")
    assert back.error == r.error and back.error is not None
    assert back.error.endswith("line\u2028two\u2029three\x85four")


def test_error_text_with_a_lone_surrogate_is_recordable(tmp_path: Path) -> None:
    body = b'{"error": {"message": "engine \\ud800 dead"}}'
    r = mock_run(500, "application/json", [body])
    assert r.error is not None and r.error.endswith("engine \ufffd dead")
    r.model_dump_json()  # the result itself serializes
    assert record_round_trip(r, tmp_path / "r.jsonl").error == r.error


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b'{"usage": {"prompt_tokens": ' + b"1" * 4_400 + b"}}", "number too long to read"),
        (b"[" * 1_000 + b"]" * 1_000, "nested too deeply to read"),
        (b'{"choices": ' * 1_000 + b"0" + b"}" * 1_000, "nested too deeply to read"),
    ],
)
def test_unreadable_json_event_is_a_stream_error(data: bytes, needle: str) -> None:
    role = b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n'
    r = mock_run(200, "text/event-stream", [role, b"data: " + data + b"\n\n", b"data: [DONE]\n\n"])
    assert (r.ok, r.error_kind, r.status) == (False, "stream_error", 200)
    assert r.error is not None and needle in r.error
    assert "OpenAI-compatible" in (r.error_hint or "")
    with pytest.raises(errors.StreamBroken):
        raise_for_result(r)


@pytest.mark.parametrize(
    ("status", "kind"), [(500, "server_error"), (400, "http_error"), (200, "bad_response")]
)
def test_unreadable_json_error_body_is_classified(status: int, kind: str) -> None:
    for body in (b"[" * 100_000, b'{"error": ' + b"1" * 4_400 + b"}"):
        r = mock_run(status, "application/json", [body])
        assert (r.ok, r.error_kind) == (False, kind)
        assert r.error is not None and "to read" in r.error


def test_lone_surrogates_in_stream_content_are_replaced() -> None:
    chunk = b'{"model": "m\\udfff", "choices": [{"delta": {"content": "a\\ud800"}}]}'
    end = b'{"choices": [{"delta": {}, "finish_reason": "stop"}]}'
    r = mock_run(200, "text/event-stream", [b"data: " + chunk + b"\n\ndata: " + end + b"\n\n"])
    assert r.ok, r.error
    assert (r.text, r.model) == ("a\ufffd", "m\ufffd")
    r.model_dump_json()
