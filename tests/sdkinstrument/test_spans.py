"""instrument(client) reads vLLM's spans: overlapping calls each get their own server parts.

The stand-in vLLM (``tests.tracing.fakevllm``) exports one ``llm_request`` span per request
through the real OpenTelemetry SDK, with figures that differ per request; what each record
should hold is what the stand-in says it issued for that request's ``X-Request-Id``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, OpenAI

from tests.tracing.fakevllm import MODEL, TracedVllm, figures
from ttftscope import Settings, instrument, instrumentation
from ttftscope.config.schema import ObservabilitySettings
from ttftscope.localstate import LocalServer, write_state
from ttftscope.records import RequestRecord, ServerPart
from ttftscope.sdkinstrument.spanjoin import SpanJoin
from ttftscope.tracing.store import SpanStore

MESSAGES: Any = [{"role": "user", "content": "hi"}]
SPAN_PARTS: tuple[ServerPart, ...] = ("queue_ms", "prefill_ms", "server_ttft_ms")
NOT_ATTRIBUTABLE = "concurrent: queue not attributable"
N = 3
# The first token waits: calls that all got their headers are in flight at once, and the
# worker's first /metrics scrape (its baseline, taken as instrument() returns) precedes the
# first request's end.
FIRST_TOKEN_S = 0.05


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _settings(port: int, read: str = "on") -> Settings:
    obs = {"read_traces": read, "trace_receiver_port": port}
    return Settings(observability=ObservabilitySettings.model_validate(obs))


@pytest.fixture
def port() -> int:
    return _free_port()


@pytest.fixture
def traced(port: int) -> Iterator[TracedVllm]:
    with TracedVllm(f"http://127.0.0.1:{port}/v1/traces", first_token_s=FIRST_TOKEN_S) as srv:
        yield srv


def _overlapping_calls(client: OpenAI) -> None:
    """N streamed calls that are all in flight together: each waits for the others' headers."""
    barrier = threading.Barrier(N, timeout=30)

    def one(_: int) -> None:
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        barrier.wait()
        with stream:
            list(stream)

    with ThreadPoolExecutor(N) as pool:
        list(pool.map(one, range(N)))


def _closed_records(client: Any) -> list[RequestRecord]:
    handle = instrumentation(client)
    assert handle.close()
    return handle.records


def _assert_own_span_parts(records: list[RequestRecord], srv: TracedVllm) -> None:
    assert len(records) == N
    for rec in records:
        assert rec.trace_id is not None
        want = srv.state.issued[rec.trace_id]  # what the stand-in issued for this request
        assert rec.queue_ms == pytest.approx(want["queue"] * 1000)
        assert rec.prefill_ms == pytest.approx(want["prefill"] * 1000)
        assert rec.server_ttft_ms == pytest.approx(want["ttft"] * 1000)
        assert all(rec.part_sources[p] == "span" for p in SPAN_PARTS)
        assert NOT_ATTRIBUTABLE not in rec.notes
        assert "concurrent: queue, prefill and server TTFT from vLLM's span" in rec.notes
    assert len({rec.queue_ms for rec in records}) == N  # no two records share a request's


def _port_is_free(port: int) -> bool:
    """Nothing listens there (the exporter's closed connections may linger in TIME_WAIT)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_overlapping_threaded_calls_each_get_their_own_span_parts(
    traced: TracedVllm, port: int
) -> None:
    with instrument(OpenAI(api_key="k", base_url=traced.base_url), settings=_settings(port)) as c:
        _overlapping_calls(c)
        records = _closed_records(c)
    _assert_own_span_parts(records, traced)
    assert _port_is_free(port)  # close() stopped the receiver


@pytest.mark.asyncio
async def test_overlapping_async_calls_each_get_their_own_span_parts(
    traced: TracedVllm, port: int
) -> None:
    async with instrument(
        AsyncOpenAI(api_key="k", base_url=traced.base_url), settings=_settings(port)
    ) as client:
        records = await _gathered(client)
    _assert_own_span_parts(records, traced)


async def _gathered(client: AsyncOpenAI) -> list[RequestRecord]:
    """N streamed calls under gather, all in flight together."""
    started: list[object] = []
    everyone = asyncio.Event()

    async def one() -> None:
        stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        started.append(stream)
        if len(started) == N:
            everyone.set()
        await everyone.wait()
        async with stream:
            async for _ in stream:
                pass

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(N))), timeout=30)
    return await asyncio.to_thread(_closed_records, client)


def test_with_traces_off_overlapping_calls_keep_the_concurrent_note(
    traced: TracedVllm, port: int
) -> None:
    off = _settings(port, "off")
    with instrument(OpenAI(api_key="k", base_url=traced.base_url), settings=off) as client:
        _overlapping_calls(client)
        records = _closed_records(client)
    assert len(records) == N
    for rec in records:
        assert NOT_ATTRIBUTABLE in rec.notes
        assert rec.queue_ms is None and rec.part_sources == {}
    assert _port_is_free(port)  # no receiver was started


def test_a_call_alone_takes_the_span_checked_against_the_histograms(
    traced: TracedVllm, port: int
) -> None:
    with instrument(OpenAI(api_key="k", base_url=traced.base_url), settings=_settings(port)) as c:
        with c.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True) as stream:
            list(stream)
        [rec] = _closed_records(c)
    want = figures(1)
    assert rec.queue_ms == pytest.approx(want["queue"] * 1000)
    assert rec.part_sources["queue_ms"] == "span"
    assert rec.checks["span_matches_histogram"] is True  # /metrics had the same figures


def test_a_receiver_port_in_use_warns_and_falls_back_to_the_histograms(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as holder, TracedVllm(None, first_token_s=FIRST_TOKEN_S) as srv:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = int(holder.getsockname()[1])
        with caplog.at_level(logging.WARNING, logger="ttftscope.instrument"):
            client = instrument(
                OpenAI(api_key="k", base_url=srv.base_url), settings=_settings(taken)
            )
        with (
            client,
            client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True) as s,
        ):
            chunks = list(s)
        [rec] = _closed_records(client)
    assert next(c.choices[0].delta.content for c in chunks if c.choices) == "ok"  # app unaffected
    assert any("spans are not read" in r.getMessage() for r in caplog.records)
    assert any(n.startswith("vLLM's spans not read") for n in rec.notes)
    assert rec.queue_ms == pytest.approx(figures(1)["queue"] * 1000), rec.notes  # histograms
    assert rec.part_sources["queue_ms"] == "histogram"


def test_auto_reads_the_spans_of_the_traced_local_server(
    traced: TracedVllm, port: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TTFTSCOPE_CACHE_DIR", str(tmp_path))
    local = LocalServer(traced.base_url, traced.port, 1, MODEL, "/l", trace_port=port)
    write_state(local)  # as `ttftscope local-server start` records a traced server
    auto = _settings(0, "auto")  # the port comes from the local server's record
    with instrument(OpenAI(api_key="k", base_url=traced.base_url), settings=auto) as client:
        _overlapping_calls(client)
        records = _closed_records(client)
    _assert_own_span_parts(records, traced)


def test_a_span_that_never_comes_leaves_the_histograms_and_says_so(port: int) -> None:
    with TracedVllm(
        None, first_token_s=FIRST_TOKEN_S
    ) as srv:  # a vLLM started without --otlp-traces-endpoint
        settings = _settings(port)
        with instrument(OpenAI(api_key="k", base_url=srv.base_url), settings=settings) as c:
            with c.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True) as s:
                list(s)
            [rec] = _closed_records(c)
    assert rec.part_sources["queue_ms"] == "histogram"
    assert rec.queue_ms == pytest.approx(figures(1)["queue"] * 1000)
    assert any(n.startswith("no vLLM span for this request within 3 s") for n in rec.notes)


def test_close_ends_the_wait_for_spans_and_still_delivers_every_record() -> None:
    got: list[RequestRecord] = []
    join: SpanJoin[None] = SpanJoin(SpanStore(), 600.0, lambda rec, _: got.append(rec))
    rec = RequestRecord(
        run_id="r", index=0, variant="chat", phase="warm", ok=True, trace_id="ab" * 16
    )
    join.put(rec, None)
    assert not join.drain(0.0)  # waiting for a span that will not come
    join.finish(30.0)  # returns once the thread ended: it did not wait the 600 s
    assert got == [rec] and "within 0" in rec.notes[-1]
