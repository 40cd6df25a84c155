"""scrape_metrics / ascrape_metrics against a tiny HTTP server on 127.0.0.1, stopped after each."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from ttftscope.errors import MetricsError, TransportFailure
from ttftscope.metrics import scrape as scrape_module
from ttftscope.metrics.scrape import ascrape_metrics, scrape_metrics

SECRET = "sk-test-do-not-leak-123"
# path -> (status, content type, body, delay seconds, extra headers)
Route = tuple[int, str, str | bytes, float, dict[str, str]]


def _handler(
    routes: dict[str, Route], seen: list[dict[str, str]], stopping: threading.Event
) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            missing: Route = (404, "application/json", '{"detail":"Not Found"}', 0.0, {})
            status, ctype, body, delay, extra = routes.get(self.path.split("?")[0], missing)
            stopping.wait(delay)  # stop() cuts slow answers short
            data = body.encode() if isinstance(body, str) else body
            try:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

    return Handler


class Server:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[dict[str, str]] = []
        self.stopping = threading.Event()
        handler = _handler(self.routes, self.seen, self.stopping)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # Non-daemon handler threads are joined by server_close(): nothing outlives the test.
        self.httpd.daemon_threads = False
        self.httpd.block_on_close = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server(vllm_text: str) -> Iterator[Server]:
    srv = Server()
    plain = "text/plain; version=0.0.4; charset=utf-8"
    srv.routes.update(
        {
            "/metrics": (200, plain, vllm_text, 0.0, {}),
            "/garbage": (200, "text/plain", "vllm:x 1\nthis is not metrics\n", 0.0, {}),
            "/html": (200, "text/html", "<html><body>UI</body></html>", 0.0, {}),
            "/auth": (401, "application/json", '{"error":"unauthorized"}', 0.0, {}),
            "/boom": (500, "text/plain", "oops", 0.0, {}),
            "/slow": (200, plain, vllm_text, 0.6, {}),
            "/redirect": (307, "text/plain", "", 0.0, {"location": "/metrics"}),
        }
    )
    try:
        yield srv
    finally:
        srv.stop()
    assert not srv.thread.is_alive()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_scrape_real_exposition(server: Server) -> None:
    snap = scrape_metrics(server.url("/metrics"), headers={"Authorization": f"Bearer {SECRET}"})
    assert snap.value("vllm:prefix_cache_queries_total") == 684458.0
    assert snap.scrape_s is not None and snap.scrape_s >= 0
    assert snap.source == server.url("/metrics")
    assert server.seen[-1].get("Authorization") == f"Bearer {SECRET}"
    assert "text/plain" in server.seen[-1].get("accept", server.seen[-1].get("Accept", ""))


def test_scrape_with_given_client_follows_redirects(server: Server) -> None:
    with httpx.Client() as client:
        first = scrape_metrics(server.url("/redirect"), client=client)
        second = scrape_metrics(server.url("/metrics"), client=client)
    assert first.samples == second.samples
    assert second.taken_ns > first.taken_ns


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/nothing-here", r"set api\.metrics_url"),
        ("/garbage", "line 2"),
        ("/html", "HTML"),
        ("/auth", "credentials"),
        ("/boom", "HTTP 500"),
    ],
)
def test_scrape_errors_are_actionable_and_hide_secrets(
    server: Server, path: str, expected: str
) -> None:
    url = server.url(path).replace("127.0.0.1", f"user:{SECRET}@127.0.0.1") + f"?k={SECRET}"
    with pytest.raises(MetricsError, match=expected) as err:
        scrape_metrics(url, headers={"Authorization": f"Bearer {SECRET}"})
    assert SECRET not in str(err.value)
    # No chained httpx exception (its text would carry the URL) in tracebacks either.
    assert err.value.__cause__ is None
    assert err.value.__context__ is None or err.value.__suppress_context__


def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{_free_port()}/metrics"
    with pytest.raises(MetricsError, match="cannot reach") as err:
        scrape_metrics(url, headers={"Authorization": f"Bearer {SECRET}"}, timeout=2)
    assert "server is running" in str(err.value) and SECRET not in str(err.value)
    # named as every HTTP client here names it (tests/client/test_transport_conformance.py)
    assert err.value.transport is TransportFailure.REFUSED and "(refused:" in err.value.message


def test_timeout(server: Server) -> None:
    with pytest.raises(MetricsError, match=r"within 0\.2 s") as err:
        scrape_metrics(server.url("/slow"), timeout=0.2)
    assert err.value.transport is TransportFailure.TIMEOUT


def test_ascrape_twin(server: Server) -> None:
    async def run() -> tuple[float | None, str]:
        snap = await ascrape_metrics(server.url("/metrics"))
        async with httpx.AsyncClient() as client:
            with pytest.raises(MetricsError, match=r"set api\.metrics_url") as err:
                await ascrape_metrics(server.url("/missing"), client=client)
        return snap.value("vllm:time_to_first_token_seconds_count"), str(err.value)

    count, message = asyncio.run(run())
    assert count == 20.0 and "404" in message


def test_ascrape_connection_refused() -> None:
    url = f"http://127.0.0.1:{_free_port()}/metrics"
    with pytest.raises(MetricsError, match="cannot reach"):
        asyncio.run(ascrape_metrics(url, timeout=2))


# --- bodies a broken server or proxy sends ------------------------------------------------


def test_invalid_utf8_is_replaced_and_noted(server: Server, vllm_text: str) -> None:
    body = vllm_text.replace("Number of times", "Number \xff of times").encode("latin-1")
    server.routes["/mangled"] = (200, "text/plain", body, 0.0, {})
    snap = scrape_metrics(server.url("/mangled"))
    assert snap.value("vllm:prefix_cache_queries_total") == 684458.0
    assert any("not valid UTF-8" in n for n in snap.notes)


def test_invalid_utf8_in_a_sample_says_so(server: Server) -> None:
    server.routes["/bad"] = (200, "text/plain", b"ok 1\nvllm:x\xff 1\n", 0.0, {})
    with pytest.raises(MetricsError, match=r"line 2: .*not valid UTF-8 \(byte 11 of 15"):
        scrape_metrics(server.url("/bad"))


@pytest.mark.parametrize("charset", ["base64", "utf-16", "no-such-codec"])
def test_charset_is_ignored_the_format_is_utf8(
    server: Server, vllm_text: str, charset: str
) -> None:
    # httpx decodes by the declared charset: base64 raised TypeError, utf-16 gave garbage.
    ctype = f"text/plain; version=0.0.4; charset={charset}"
    server.routes["/charset"] = (200, ctype, vllm_text, 0.0, {})
    assert (
        scrape_metrics(server.url("/charset")).value("vllm:prefix_cache_queries_total") == 684458.0
    )


def test_body_over_the_cap_is_refused(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scrape_module, "MAX_BODY_BYTES", 10_000)
    with pytest.raises(MetricsError, match="more than 0 MiB") as err:
        scrape_metrics(server.url("/metrics"))
    assert "api.metrics_url" in str(err.value)

    async def run() -> None:
        with pytest.raises(MetricsError, match="more than 0 MiB"):
            await ascrape_metrics(server.url("/metrics"))

    asyncio.run(run())


def test_scraped_duplicates_are_noted(server: Server, vllm_text: str) -> None:
    body = vllm_text + 'vllm:num_requests_waiting{engine="0",model_name="tiny"} 9.0\n'
    server.routes["/dup"] = (200, "text/plain", body, 0.0, {})
    snap = scrape_metrics(server.url("/dup"))
    assert snap.value("vllm:num_requests_waiting") == 0.0 and snap.scrape_s is not None
    assert any("more than once" in n for n in snap.notes)
