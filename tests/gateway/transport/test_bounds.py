"""The attack suite of issue 20 ("bounded everything"): what one client can make the gateway
hold. Oversized and countless headers, slowloris heads, idle sockets, a never-ending body,
a huge upstream answer and a stream that never ends: each is refused or closed within its
configured bound, and a good request is served alongside. A huge whole answer passed on
unchanged streams through instead, never held whole.

Timeouts here are configured small (0.5 s) and each test waits on the socket itself, with
a generous bound, for the gateway to act.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gatewaymetrics import gateway_metric
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

MODEL = "tiny-qwen-chat"
BOUND_S = 20.0  # how long a test waits for the gateway to act on a 0.5 s limit
QUICK = {
    "header_timeout_s": 0.5,
    "body_timeout_s": 0.5,
    "idle_timeout_s": 0.5,
    "max_header_kb": 8,
    "max_headers": 20,
}


def _settings(base_url: str, **kw: object) -> GatewaySettings:
    up = UpstreamSettings(base_url=base_url, mode="text", models=(MODEL,))
    return GatewaySettings.model_validate({"upstreams": {"u": up}, **QUICK, **kw})


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def gateway(upstream: FaultServer) -> Iterator[GatewayServer]:
    with GatewayServer(_settings(upstream.base_url())) as gw:
        yield gw


def _connect(gw: GatewayServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", gw.port), timeout=BOUND_S)


def _until_closed(sock: socket.socket, keep_sending: bytes = b"") -> bytes:
    """What the gateway sends until it closes the connection (``keep_sending`` goes out
    meanwhile, as a slow client dribbles); fails if it is still open after BOUND_S."""
    got = b""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                return got
            if not data:
                return got
            got += data
        elif keep_sending:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(keep_sending)  # closed: the next read says so
    raise AssertionError(f"the gateway held the connection for {BOUND_S} s (got {got[:200]!r})")


def _status_and_body(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _good_request(gw: GatewayServer) -> None:
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 3}
    answer = httpx.post(gw.base_url + "/completions", json=body, timeout=BOUND_S)
    assert answer.status_code == 200, answer.text


def test_oversized_headers_get_a_431_and_the_connection_closes(gateway: GatewayServer) -> None:
    with _connect(gateway) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Big: ")
        raw = _until_closed(sock, keep_sending=b"a" * 65536)  # 128 MB would go on and on
    status, body = _status_and_body(raw)
    assert status == 431
    assert body["type"] == "error" and "gateway.max_header_kb" in body["error"]["message"]
    _good_request(gateway)


def test_a_head_that_arrives_whole_but_too_large_gets_a_431(gateway: GatewayServer) -> None:
    with _connect(gateway) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
        status, body = _status_and_body(_until_closed(sock))
    assert status == 431 and "8 KB" in body["error"]["message"]


def test_too_many_headers_get_a_431(gateway: GatewayServer) -> None:
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(21))
    with _connect(gateway) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        status, body = _status_and_body(_until_closed(sock))
    assert status == 431 and "gateway.max_headers" in body["error"]["message"]


def test_headers_within_the_limits_are_served(gateway: GatewayServer) -> None:
    headers = {f"x-h{i}": "v" * 300 for i in range(15)}
    answer = httpx.get(gateway.base_url + "/models", headers=headers, timeout=BOUND_S)
    assert answer.status_code == 200


def test_a_slowloris_head_is_closed_with_a_408(gateway: GatewayServer) -> None:
    with _connect(gateway) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        raw = _until_closed(sock, keep_sending=b"X: y\r\n")  # a header every 50 ms, forever
    status, body = _status_and_body(raw)
    assert status == 408 and "gateway.header_timeout_s" in body["error"]["message"]


def test_a_connection_that_sends_nothing_is_closed(gateway: GatewayServer) -> None:
    with _connect(gateway) as sock:
        assert _until_closed(sock) == b""


def test_an_idle_keep_alive_connection_is_closed(gateway: GatewayServer) -> None:
    with _connect(gateway) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        raw = _until_closed(sock)  # the answer, then nothing more is asked
    assert raw.startswith(b"HTTP/1.1 200 ")


def test_a_never_ending_chunked_body_is_closed_with_a_408(gateway: GatewayServer) -> None:
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    with _connect(gateway) as sock:
        sock.sendall(head + b"1\r\n{\r\n")
        raw = _until_closed(sock, keep_sending=b"1\r\n \r\n")
    status, body = _status_and_body(raw)
    assert status == 408 and "gateway.body_timeout_s" in body["error"]["message"]


def test_a_good_request_is_served_while_attackers_hold_connections(
    gateway: GatewayServer,
) -> None:
    held = [_connect(gateway) for _ in range(20)]
    try:
        for sock in held:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        _good_request(gateway)
    finally:
        for sock in held:
            sock.close()


class RawUpstream:
    """An upstream on 127.0.0.1 that reads one request per connection and runs ``answer``
    on the socket; ``wrote`` counts what it got out, ``failed`` is set when a write failed
    (the gateway closed the connection)."""

    def __init__(self, answer: Callable[[RawUpstream, socket.socket], None]) -> None:
        self.answer = answer
        self.wrote = 0
        self.failed = threading.Event()
        self.closed_by_peer = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.close()
        self._thread.join(timeout=BOUND_S)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(BOUND_S)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += conn.recv(65536)
            try:
                self.answer(self, conn)
            except (BrokenPipeError, ConnectionResetError):
                self.failed.set()
            except TimeoutError:
                pass  # the gateway held on: the test says so

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.wrote += len(data)


Handler = Callable[[RawUpstream, socket.socket], None]
Pieces = Callable[[RawUpstream], Iterable[bytes]]
OBJECT = b'{"pad": "' + b"x" * (32 << 20) + b'"}'  # valid JSON, far past a 1 MB cap
MB = 1 << 20
CHUNKED = b"Transfer-Encoding: chunked\r\n\r\n"


@contextlib.contextmanager
def _behind(answer: Handler, **kw: object) -> Iterator[tuple[RawUpstream, GatewayServer]]:
    """A gateway with ``kw`` in front of a raw upstream that answers with ``answer``."""
    with RawUpstream(answer) as up, GatewayServer(_settings(up.base_url, **kw)) as gw:
        yield up, gw


def _json_answer(
    pieces: Pieces, *, status: bytes = b"200 OK", length: int | None = None, end: bool = True
) -> Handler:
    """An answer of ``status`` whose JSON body is ``pieces``: sized by ``length`` (more than
    is sent: the upstream breaks off) or chunked, with its last chunk if ``end``; the
    connection closes after it."""

    def answer(srv: RawUpstream, conn: socket.socket) -> None:
        srv.send(conn, b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n" % status)
        sized = length is not None
        srv.send(conn, CHUNKED if length is None else b"Content-Length: %d\r\n\r\n" % length)
        for piece in pieces(srv):
            if not sized:
                srv.send(conn, b"%x\r\n" % len(piece))
            srv.send(conn, piece if sized else piece + b"\r\n")
        if not sized and end:
            srv.send(conn, b"0\r\n\r\n")

    return answer


def _pieces(body: bytes) -> Pieces:
    """``body`` in 1 MB pieces."""
    return lambda srv: (body[i : i + MB] for i in range(0, len(body), MB))


def _endless(opening: bytes) -> Pieces:
    """``opening``, then 1 MB pieces of padding up to a 1 GB answer."""

    def pieces(srv: RawUpstream) -> Iterator[bytes]:
        yield opening
        piece = b"x" * MB
        while srv.wrote < 1 << 30:
            yield piece

    return pieces


PASSED = [
    ("/completions", {"model": MODEL, "prompt": "hi"}, "openai"),
    ("/messages", {"model": MODEL, "max_tokens": 3, "messages": []}, "anthropic"),
]


@pytest.mark.parametrize(("path", "body", "fmt"), PASSED)
@pytest.mark.parametrize("sized", [True, False])
def test_a_huge_answer_passed_through_streams_through_whole(
    path: str, body: dict[str, Any], fmt: str, sized: bool
) -> None:
    length = len(OBJECT) if sized else None
    with (
        _behind(_json_answer(_pieces(OBJECT), length=length), max_answer_mb=1) as (_up, gw),
    ):
        tracemalloc.start()
        try:
            got = 0
            with httpx.stream("POST", gw.base_url + path, json=body, timeout=BOUND_S) as answer:
                assert answer.status_code == 200
                assert answer.headers["content-type"] == "application/json"
                assert answer.headers.get("content-length") == (str(length) if sized else None)
                for part in answer.iter_raw():  # compared as it comes: not held here either
                    assert part == OBJECT[got : got + len(part)]
                    got += len(part)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert got == len(OBJECT)
    # the process (the upstream and the client too) held the cap and a few MB in flight at
    # once (~9 MB measured), not the 32 MB answer
    assert peak < 16 * MB, f"{peak:,} bytes held at once"


def test_a_client_that_leaves_a_huge_answer_closes_its_upstream() -> None:
    with (
        _behind(_json_answer(_endless(b'{"pad": "')), max_answer_mb=1) as (up, gw),
    ):
        body = {"model": MODEL, "prompt": "hi"}
        url = gw.base_url + "/completions"
        with httpx.stream("POST", url, json=body, timeout=BOUND_S) as answer:
            assert answer.status_code == 200
            first = next(answer.iter_raw())
        assert up.failed.wait(BOUND_S)  # the gateway closed the upstream: vLLM aborts
        left = "ttftscope_gateway_client_disconnects_total"
        assert gateway_metric(gw.port, left, phase="mid_stream") == 1
    assert first.startswith(b'{"pad": "')
    # it read ahead of the client by no more than the cap and the sockets' buffers
    assert up.wrote < 64 * MB


@pytest.mark.parametrize(("path", "body", "fmt"), PASSED)
def test_a_huge_error_body_is_a_502_and_is_not_held(
    path: str, body: dict[str, Any], fmt: str
) -> None:
    error_body = _json_answer(_endless(b'{"error": "'), status=b"500 Internal Server Error")
    with (
        _behind(error_body, max_answer_mb=1) as (up, gw),
    ):
        answer = httpx.post(gw.base_url + path, json=body, timeout=BOUND_S)
        assert up.failed.wait(BOUND_S)  # the gateway stopped reading and closed
    # a body that is scrubbed of credentials before it is relayed is read whole, or not at all
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert "more than 1 MB (gateway.max_answer_mb)" in error["message"]
    assert (error["type"] == "api_error") == (fmt == "anthropic")
    assert up.wrote < 64 * MB


@pytest.mark.parametrize("sized", [True, False])
def test_a_huge_answer_that_is_not_a_json_object_is_a_502(sized: bool) -> None:
    array = _json_answer(_endless(b' \r\n\t["'), length=1 << 30 if sized else None)
    with (
        _behind(array, max_answer_mb=1) as (up, gw),
    ):
        body = {"model": MODEL, "prompt": "hi"}
        answer = httpx.post(gw.base_url + "/completions", json=body, timeout=BOUND_S)
        assert up.failed.wait(BOUND_S)
    assert answer.status_code == 502
    assert "not a JSON object" in answer.json()["error"]["message"]


def test_a_huge_answer_to_translate_is_a_502(qwen2_dir: Path) -> None:
    with FaultServer() as srv:
        up = UpstreamSettings(
            base_url=srv.base_url(),
            model_dir=qwen2_dir,
            models=("tiny-llama",),
            plain_chats="completions",
        )
        with GatewayServer(GatewaySettings(upstreams={"ids": up}, max_answer_mb=1)) as gw:
            assert gw.gateway.upstreams[0].plain_via_completions
            srv.options.content = ["x" * (2 * MB)]  # once the start-up probes have their answers
            chat = [{"role": "user", "content": "hi"}]
            body = {"model": "tiny-llama", "messages": chat, "max_tokens": 3}
            answer = httpx.post(gw.base_url + "/chat/completions", json=body, timeout=BOUND_S)
        assert srv.last_request.path.endswith("/v1/completions")  # answered as a chat: rewritten
    assert answer.status_code == 502
    assert "more than 1 MB (gateway.max_answer_mb)" in answer.json()["error"]["message"]


def _cut_answer(gw: GatewayServer, caplog: pytest.LogCaptureFixture) -> None:
    """A completion whose answer must arrive cut: a 200, then the connection closed before
    its end (never a hang, never an answer that looks whole); uvicorn's log goes to
    ``caplog`` meanwhile, for the tests to find no error of its own there."""
    server_log = logging.getLogger("uvicorn.error")
    server_log.addHandler(caplog.handler)  # once uvicorn has set its loggers up
    try:
        body = {"model": MODEL, "prompt": "hi"}
        url = gw.base_url + "/completions"
        with httpx.stream("POST", url, json=body, timeout=BOUND_S) as answer:
            assert answer.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):
                answer.read()
    finally:
        server_log.removeHandler(caplog.handler)


@pytest.mark.parametrize("sized", [True, False])
def test_an_answer_that_breaks_off_once_streamed_through_closes_the_client_connection(
    sized: bool, caplog: pytest.LogCaptureFixture
) -> None:
    part = _pieces(OBJECT[: 3 * MB])  # past the 1 MB cap, then the upstream closes
    broken = _json_answer(part, length=len(OBJECT) if sized else None, end=False)
    with (
        _behind(broken, max_answer_mb=1) as (_up, gw),
        caplog.at_level(logging.WARNING, logger="ttftscope.gateway"),
    ):
        _cut_answer(gw, caplog)
        # counted as a stream that breaks off is: with the status it was sent with
        total = "ttftscope_gateway_requests_total"
        assert gateway_metric(gw.port, total, status="200") == 1
    assert "upstream 'u' broke off" in caplog.text and "closed" in caplog.text
    assert "ASGI" not in caplog.text  # the gateway closed it, not the server's error path
    assert '"pad"' not in caplog.text  # what the answer said is not logged


def _sized_huge(srv: RawUpstream, conn: socket.socket) -> None:
    srv.send(conn, b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n")
    srv.send(conn, b"Content-Length: 1073741824\r\n\r\n{")
    while conn.recv(1):  # the gateway must close without reading the rest
        pass
    srv.closed_by_peer.set()


def test_an_error_declared_too_large_is_refused_before_it_is_read() -> None:
    with (
        _behind(_sized_huge, max_answer_mb=1) as (up, gw),
    ):
        body = {"model": MODEL, "prompt": "hi"}
        answer = httpx.post(gw.base_url + "/completions", json=body, timeout=BOUND_S)
        assert up.closed_by_peer.wait(BOUND_S)
    assert answer.status_code == 502 and "gateway.max_answer_mb" in answer.text


def _stalled_stream(srv: RawUpstream, conn: socket.socket) -> None:
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
    srv.send(conn, b"Transfer-Encoding: chunked\r\n\r\n")
    event = b'data: {"choices": [{"text": "a", "index": 0}]}\n\n'
    srv.send(conn, b"%x\r\n%s\r\n" % (len(event), event))
    while conn.recv(1):  # then nothing, until the gateway gives up on it
        pass
    srv.closed_by_peer.set()


@pytest.mark.parametrize(
    ("path", "body", "fmt"),
    [
        ("/completions", {"model": MODEL, "prompt": "hi", "stream": True}, "openai"),
        (
            "/messages",
            {"model": MODEL, "max_tokens": 3, "messages": [], "stream": True},
            "anthropic",
        ),
    ],
)
def test_the_total_deadline_ends_a_stream_with_an_error_event(
    path: str, body: dict[str, Any], fmt: str
) -> None:
    with (
        _behind(_stalled_stream, request_timeout_s=2.0) as (up, gw),
    ):
        with httpx.stream("POST", gw.base_url + path, json=body, timeout=BOUND_S) as answer:
            assert answer.status_code == 200
            text = answer.read().decode()
        assert up.closed_by_peer.wait(BOUND_S)  # the upstream's work is aborted too
    last = text.strip().split("\n\n")[-1]
    assert "gateway.request_timeout_s" in last
    if fmt == "anthropic":
        assert last.startswith("event: error\n") and '"type":"timeout_error"' in last
    else:
        assert last.startswith("data: ") and '"code":504' in last


def _silent(srv: RawUpstream, conn: socket.socket) -> None:
    while conn.recv(1):  # no answer at all, until the gateway gives up
        pass
    srv.closed_by_peer.set()


def test_the_total_deadline_before_any_answer_is_a_504() -> None:
    with (
        _behind(_silent, request_timeout_s=2.0) as (up, gw),
    ):
        body = {"model": MODEL, "max_tokens": 3, "messages": []}
        answer = httpx.post(gw.base_url + "/messages", json=body, timeout=BOUND_S)
        assert up.closed_by_peer.wait(BOUND_S)
        # counted as what the client got, not as a client that left
        total = "ttftscope_gateway_requests_total"
        assert gateway_metric(gw.port, total, status="504") == 1
        assert gateway_metric(gw.port, total, status="499") == 0
        assert gateway_metric(gw.port, "ttftscope_gateway_client_disconnects_total") == 0
    assert answer.status_code == 504
    error = answer.json()["error"]
    assert error["type"] == "timeout_error" and "gateway.request_timeout_s" in error["message"]


def _stalled_whole(srv: RawUpstream, conn: socket.socket) -> None:
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
    srv.send(conn, b"Content-Length: %d\r\n\r\n" % len(OBJECT))
    srv.send(conn, OBJECT[: 2 * MB])  # past the 1 MB cap: passed on as it comes
    while conn.recv(1):  # then nothing, until the gateway gives up on it
        pass
    srv.closed_by_peer.set()


def test_the_total_deadline_cuts_a_whole_answer_passed_on_as_it_came(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _behind(_stalled_whole, max_answer_mb=1, request_timeout_s=2.0) as (up, gw):
        _cut_answer(gw, caplog)
        assert up.closed_by_peer.wait(BOUND_S)  # the upstream's work is aborted too
    assert "ASGI" not in caplog.text  # the gateway closed it, not the server's error path
