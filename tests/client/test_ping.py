from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope import errors
from ttftscope.client.ping import PingResult, list_models, ping
from ttftscope.config.redact import redact

KEY = "sk-ping-SECRET-77"


@pytest.fixture(scope="module")
def srv() -> Iterator[FaultServer]:
    with FaultServer() as s:
        yield s


def do_ping(
    base_url: str,
    model: str | None = "tiny-llama",
    *,
    timeout_s: float = 5.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> PingResult:
    async def go() -> PingResult:
        async with httpx.AsyncClient(trust_env=False, transport=transport) as c:
            return await ping(
                base_url=base_url, api_key=KEY, model=model, timeout_s=timeout_s, client=c
            )

    return asyncio.run(go())


def ping_error(
    base_url: str, model: str | None = "tiny-llama", *, timeout_s: float = 5.0
) -> errors.ServerRequestError:
    with pytest.raises(errors.ServerRequestError) as info:
        do_ping(base_url, model, timeout_s=timeout_s)
    exc = info.value
    assert KEY not in str(exc)
    return exc


def test_ping_success(srv: FaultServer) -> None:
    r = do_ping(srv.base_url())
    assert (r.model_requested, r.model_reported, r.status) == ("tiny-llama", "tiny-llama", 200)
    assert r.latency_ms > 0
    sent = srv.last_request.json()
    assert sent["max_tokens"] == 8 and sent["messages"][0]["content"] == "ping"
    assert "stream" not in sent
    assert srv.last_request.headers["authorization"] == f"Bearer {KEY}"


def test_ping_without_model_takes_first_listed(srv: FaultServer) -> None:
    r = do_ping(srv.base_url(), None)
    assert r.model_requested == "tiny-llama"
    assert [q.path for q in srv.requests[-2:]] == [
        "/normal/v1/models",
        "/normal/v1/chat/completions",
    ]


def test_list_models(srv: FaultServer) -> None:
    async def go() -> list[str]:
        async with httpx.AsyncClient(trust_env=False) as c:
            return await list_models(base_url=srv.base_url(), api_key=None, timeout_s=5, client=c)

    assert asyncio.run(go()) == ["tiny-llama", "tiny-qwen-chat"]


def test_unknown_model_lists_names_and_suggests_closest(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url(), "tiny-lama")
    assert isinstance(exc, errors.ModelNotFound) and exc.exit_code == 8
    assert "available: tiny-llama, tiny-qwen-chat" in exc.message
    assert exc.hint == "did you mean 'tiny-llama'?"


def test_unknown_model_without_close_match(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url(), "zzzzzzzz")
    assert isinstance(exc, errors.ModelNotFound)
    assert exc.hint is not None and "--model" in exc.hint


def test_base_url_without_v1(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url(v1=False))
    assert isinstance(exc, errors.BadResponse) and exc.exit_code == 11
    assert "should end in /v1" in str(exc)


def test_html_answer(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url("html"))
    assert isinstance(exc, errors.BadResponse)
    assert "text/html" in exc.message and "should end in /v1" in str(exc)


def test_html_answer_to_model_listing(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url("html"), None)
    assert isinstance(exc, errors.BadResponse) and "should end in /v1" in str(exc)


@pytest.mark.parametrize(
    ("scenario", "exc_type", "code", "needle"),
    [
        ("unauthorized", errors.AuthError, 7, "OPENAI_API_KEY"),
        ("rate_limited", errors.RateLimited, 9, "Retry-After: 7"),
        ("server_error", errors.ServerError, 10, "HTTP 500"),
    ],
)
def test_status_failures(
    srv: FaultServer,
    scenario: str,
    exc_type: type[errors.ServerRequestError],
    code: int,
    needle: str,
) -> None:
    exc = ping_error(srv.base_url(scenario))
    assert type(exc) is exc_type and exc.exit_code == code
    assert needle in str(exc)


def test_auth_error_with_echoed_key_is_redacted(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url("unauthorized"))
    assert f"Incorrect API key provided: {redact(KEY)}" in exc.message
    assert "api.api_key" in str(exc)


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exc = ping_error(f"http://127.0.0.1:{port}/v1")
    assert isinstance(exc, errors.ServerUnreachable) and exc.kind == "connection_refused"
    assert exc.exit_code == 4
    # the library says what it knows; the CLI adds where a local server runs (tests/cli)
    assert "is a server listening at that address? check base_url" in str(exc)


def test_tls_error(srv: FaultServer) -> None:
    exc = ping_error(srv.base_url().replace("http://", "https://"))
    assert isinstance(exc, errors.ServerUnreachable) and exc.kind == "tls_error"
    assert exc.exit_code == 17


def test_timeout() -> None:
    with FaultServer(FaultOptions(header_delay_s=1.0)) as s:
        exc = ping_error(s.base_url("slow_headers"), timeout_s=0.2)
    assert isinstance(exc, errors.RequestTimeout) and exc.exit_code == 5
    assert "api.timeout_seconds" in str(exc)


def test_dns_failure(unresolvable: str) -> None:
    with pytest.raises(errors.ServerUnreachable) as info:
        do_ping(f"http://{unresolvable}/v1")
    assert info.value.kind == "dns_failure" and "no-such-host.invalid" in str(info.value)
    assert info.value.exit_code == 16
