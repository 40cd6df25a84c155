"""One bench request: serialize, stream (timed in phases and per content chunk), record.

A request speaks the run's API (chat, Anthropic Messages or OpenAI Responses): it is posted
to that API's path and its stream read by that API's rules; the record's ``variant`` names
the API, and its ``prompt_tokens``/``completion_tokens`` are the server's usage in any API.

The record is the probe's (:func:`ttftscope.decompose.client_record`) plus what a
load test adds: target, session, turn, shard, attempt, the wait for a concurrency slot,
end-to-end latency, time per output token and inter-token gaps. TTFT counts from the start
of client work (serialization), as the probe's client TTFT does. Bodies are serialized
with orjson: a 100K-token conversation is ~0.5 MB of JSON, ~10x faster than ``json``, and
that time is spent on the event loop every other request is timed on.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass

import certifi
import orjson

from ttftscope.bench.plan.workload import TurnPlan
from ttftscope.bench.send.chunks import gaps_ms
from ttftscope.bench.send.transport import StreamClient
from ttftscope.bench.targets import Target
from ttftscope.client.apis import API_PATHS, Api
from ttftscope.client.stream import StreamResult
from ttftscope.decompose import RequestIdentity, client_record
from ttftscope.records import Phase, RequestRecord
from ttftscope.tracing.context import TraceContext, request_id_in, with_trace


def encode_stream_body(body: Mapping[str, object], api: Api = "chat") -> bytes:
    """The request bytes: ``body`` with streaming (and, on chat, usage reporting) switched on.

    Anthropic's and the Responses API's streams always carry usage, and have no
    ``stream_options``.

    >>> encode_stream_body({"model": "m", "messages": []})
    b'{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}'
    >>> encode_stream_body({"model": "m", "input": "hi"}, "responses")
    b'{"model":"m","input":"hi","stream":true}'
    """
    if api != "chat":
        return orjson.dumps({**body, "stream": True})
    opts = body.get("stream_options")
    extra = dict(opts) if isinstance(opts, Mapping) else {}
    full = {**body, "stream": True, "stream_options": {**extra, "include_usage": True}}
    return orjson.dumps(full)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # one context for every worker's client: loading the CA bundle takes ~40 ms each time
    return ssl.create_default_context(cafile=certifi.where())


def request_client(connections: int = 1) -> StreamClient:
    """The HTTP client of one session worker (:mod:`.transport`), one connection a target.

    >>> import asyncio
    >>> async def main() -> None:
    ...     async with request_client(2):
    ...         pass
    >>> asyncio.run(main())
    """
    return StreamClient(connections=connections, tls=_tls_context())


@dataclass(frozen=True)
class Attempt:
    """Which request of the workload this is, and where it goes."""

    run_id: str
    shard: str
    target: Target
    turn: TurnPlan
    phase: Phase
    context_tokens: int
    attempt: int = 1
    api: Api = "chat"


@dataclass(frozen=True)
class Sent:
    """A finished request: its record, its inter-token gaps and the raw result; ``trace``
    is the context sent when it is ours (a span may carry its ids), None when the target's
    headers brought their own ``traceparent``."""

    record: RequestRecord
    itl_ms: list[float]
    result: StreamResult
    trace: TraceContext | None = None


def _tpot(e2el: float | None, ttft: float | None, tokens: int | None) -> float | None:
    if e2el is None or ttft is None or tokens is None or tokens < 2:
        return None
    return (e2el - ttft) / (tokens - 1)


def bench_record(
    result: StreamResult, who: Attempt, serialize_ms: float, stamps: list[int]
) -> tuple[RequestRecord, list[float]]:
    """The record of one finished request and its inter-token gaps (ms).

    >>> from ttftscope.client.stream import PhaseTimes
    >>> r = StreamResult(ok=True, completion_tokens=3,
    ...                  phases=PhaseTimes(first_content_ms=10.0, last_byte_ms=30.0))
    >>> who = Attempt("r", "1/1", Target("direct", "u", "m"), TurnPlan(0, 1, 4, 9, 0.0, 0),
    ...               "warm", 100)
    >>> rec, gaps = bench_record(r, who, 1.0, [0, 8_000_000, 18_000_000])
    >>> rec.client_ttft_ms, rec.e2el_ms, rec.tpot_ms, rec.itl_mean_ms, gaps
    (11.0, 31.0, 10.0, 9.0, [8.0, 10.0])
    """
    ident = RequestIdentity(who.run_id, who.turn.index, who.api, who.phase, who.context_tokens)
    rec = client_record(result, ident, tokenize_ms=None)
    rec.serialize_ms = serialize_ms  # the body was serialized here, not by the stream code
    wire, last = result.phases.first_content_ms, result.phases.last_byte_ms
    rec.client_ttft_ms = None if wire is None else wire + serialize_ms
    gaps = gaps_ms(stamps) if result.ok else []
    rec.target, rec.session, rec.turn = who.target.name, who.turn.session, who.turn.turn
    rec.shard, rec.attempt = who.shard, who.attempt
    rec.cached_tokens = result.cached_tokens
    if result.ok:
        rec.e2el_ms = None if last is None else last + serialize_ms
        rec.tpot_ms = _tpot(rec.e2el_ms, rec.client_ttft_ms, result.completion_tokens)
        rec.content_chunks = len(stamps)
        rec.itl_mean_ms = sum(gaps) / len(gaps) if gaps else None
        rec.itl_max_ms = max(gaps) if gaps else None
    return rec, gaps


async def send(
    client: StreamClient,
    who: Attempt,
    body: Mapping[str, object],
    *,
    timeout_s: float,
) -> Sent:
    """Send one streaming request of ``who.api`` and build its record; never raises for
    faults.

    Inside a run (``client`` a :class:`StreamClient`, ``who`` the workload's next turn)::

        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        sent = await send(client, who, body, timeout_s=60)
        sent.record.ok, sent.record.client_ttft_ms  # (True, 41.7)
    """
    t = time.perf_counter_ns()
    content = encode_stream_body(body, who.api)
    serialize_ms = (time.perf_counter_ns() - t) / 1e6
    headers, trace, ours = with_trace(who.target.headers)
    result, stamps = await client.stream(
        who.target.base_url.rstrip("/") + API_PATHS[who.api],
        content,
        api_key=who.target.api_key,
        timeout_s=timeout_s,
        headers=headers,
        api=who.api,
    )
    rec, gaps = bench_record(result, who, serialize_ms, stamps)
    rec.trace_id = None if trace is None else trace.trace_id
    rec.request_id = request_id_in(headers)
    return Sent(rec, gaps, result, trace if ours else None)
