"""Every probe request carries its trace: traceparent and X-Request-Id, the record's trace id."""

from __future__ import annotations

import asyncio

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.faultserver import FaultServer
from ttftscope.client.endpoint import Endpoint
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.tracing.context import parse_traceparent
from ttftscope.tracing.emit import open_emitter


def _ep(srv: FaultServer, headers: dict[str, str] | None = None) -> Endpoint:
    base = srv.base_url("normal")
    return Endpoint(
        base_url=base,
        metrics_url=base[: -len("/v1")] + "/metrics",
        model="tiny-llama",
        timeout_s=10,
        headers=headers or {},
    )


def test_each_request_sends_a_new_trace_and_its_client_span_carries_the_ids_sent() -> None:
    sink = InMemorySpanExporter()
    emitter = open_emitter(None, exporter=sink)
    opts = ProbeOptions(repeat=2, num_warmups=0, metrics_settle_s=0)
    with FaultServer() as srv:
        run = asyncio.run(run_probe(_ep(srv), opts, emitter=emitter))
        posts = [r for r in srv.requests if r.path.endswith("/completions")]
    assert emitter is not None
    emitter.shutdown()
    sent = [parse_traceparent(r.headers["traceparent"]) for r in posts]
    assert [r.trace_id for r in run.records] == [c.trace_id for c in sent]
    assert [r.headers["x-request-id"] for r in posts] == [c.trace_id for c in sent]
    assert len({c.trace_id for c in sent}) == len(sent) == 3
    spans = sink.get_finished_spans()
    got = [(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in spans]
    assert got == [(c.trace_id, c.span_id) for c in sent]


def test_a_traceparent_the_user_sets_goes_out_as_it_is_and_no_span_claims_its_id() -> None:
    theirs = "00-" + "a1" * 16 + "-" + "b2" * 8 + "-01"
    sink = InMemorySpanExporter()
    emitter = open_emitter(None, exporter=sink)
    opts = ProbeOptions(repeat=1, num_warmups=0, metrics_settle_s=0)
    with FaultServer() as srv:
        ep = _ep(srv, {"traceparent": theirs})
        run = asyncio.run(run_probe(ep, opts, emitter=emitter))
        posts = [r for r in srv.requests if r.path.endswith("/completions")]
    assert emitter is not None
    emitter.shutdown()
    assert {r.headers["traceparent"] for r in posts} == {theirs}
    assert {r.trace_id for r in run.records} == {"a1" * 16}
    assert sink.get_finished_spans() == ()
