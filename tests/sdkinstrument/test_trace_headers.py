"""instrument(client): each call sends a trace (unless the caller's own), spans over OTLP."""

from __future__ import annotations

import re
from typing import Any

from openai import OpenAI

from tests.faultserver import FaultServer
from tests.tracing.otlpsink import OtlpSink
from ttftscope import Settings, instrument, instrumentation
from ttftscope.config.schema import ObservabilitySettings
from ttftscope.tracing.context import parse_traceparent

MESSAGES: Any = [{"role": "user", "content": "hi"}]
THEIRS = "00-" + "c3" * 16 + "-" + "d4" * 8 + "-01"


def _posts(srv: FaultServer) -> list[dict[str, str]]:
    return [r.headers for r in srv.requests if r.path.endswith("/completions")]


def test_calls_carry_a_trace_the_record_names_and_the_client_span_continues() -> None:
    with OtlpSink() as sink, FaultServer() as srv:
        settings = Settings(observability=ObservabilitySettings(otlp_endpoint=sink.url))
        client = instrument(OpenAI(api_key="k", base_url=srv.base_url()), settings=settings)
        with client.chat.completions.create(
            model="tiny-llama", messages=MESSAGES, stream=True
        ) as s:
            list(s)
        client.chat.completions.create(model="tiny-llama", messages=MESSAGES)
        handle = instrumentation(client)
        assert handle.close()
        sent = [parse_traceparent(h["traceparent"]) for h in _posts(srv)]
        assert [h["x-request-id"] for h in _posts(srv)] == [c.trace_id for c in sent]
    assert [r.trace_id for r in handle.records] == [c.trace_id for c in sent]
    spans = sorted((s.trace_id.hex(), s.span_id.hex(), svc) for svc, s in sink.spans())
    assert spans == sorted((c.trace_id, c.span_id, "ttftscope") for c in sent)


def test_the_callers_trace_headers_win_and_are_what_the_record_holds() -> None:
    with FaultServer() as srv:
        client = instrument(OpenAI(api_key="k", base_url=srv.base_url()), settings=Settings())
        client.chat.completions.create(
            model="tiny-llama", messages=MESSAGES, extra_headers={"Traceparent": THEIRS}
        )
        other = client.with_options(default_headers={"X-Request-Id": "job-1"})
        instrument(other, settings=Settings())
        other.chat.completions.create(model="tiny-llama", messages=MESSAGES)
        first, second = _posts(srv)
        records = [
            instrumentation(c).records for c in (client, other) if instrumentation(c).flush()
        ]
        instrumentation(client).close()
        instrumentation(other).close()
    # under the caller's trace (shared by its other calls) the request id is one of its own
    assert first["traceparent"] == THEIRS and first["x-request-id"] != "c3" * 16
    assert re.fullmatch("[0-9a-f]{32}", first["x-request-id"])
    assert records[0][0].trace_id == "c3" * 16
    assert records[0][0].request_id == first["x-request-id"]
    assert second["x-request-id"] == "job-1"  # the client's own id is kept
    assert records[1][0].trace_id == parse_traceparent(second["traceparent"]).trace_id
    assert records[1][0].request_id == "job-1"
