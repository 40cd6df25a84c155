"""Whether spans go out and where; what goes out over OTLP; nothing imported when off."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.tracing.otlpsink import OtlpSink
from ttftscope.errors import MissingExtra
from ttftscope.records import RequestRecord
from ttftscope.tracing.context import new_context
from ttftscope.tracing.emit import open_emitter, traces_endpoint
from ttftscope.tracing.spans import client_span


@pytest.mark.parametrize(
    ("setting", "env", "want"),
    [
        (None, {}, None),
        ("http://h:4318", {}, "http://h:4318/v1/traces"),
        ("http://h:4318/v1/traces", {}, "http://h:4318/v1/traces"),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"),
        # the traces variable is the whole URL, as the SDK reads it
        (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/x"}, "http://c:9/x"),
        (
            "http://h:4318",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            "http://h:4318/v1/traces",
        ),
        ("http://h:4318", {"OTEL_SDK_DISABLED": "TRUE"}, None),
    ],
)
def test_the_endpoint_comes_from_the_setting_then_the_standard_variables(
    setting: str | None, env: dict[str, str], want: str | None
) -> None:
    assert traces_endpoint(setting, env) == want


def test_off_imports_nothing_from_opentelemetry() -> None:
    code = textwrap.dedent(
        """
        import sys
        import ttftscope.probe.experiments, ttftscope.gateway.app, ttftscope.sdkinstrument.wrap
        import ttftscope.bench.runner, ttftscope.cli.probe, ttftscope.cli.gateway
        from ttftscope.tracing.emit import open_emitter
        assert open_emitter(None, environ={}) is None
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


def test_on_without_the_extra_is_missing_extra_saying_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtra) as info:
        open_emitter("http://127.0.0.1:4318", command="probe", environ={})
    assert info.value.exit_code == 18
    assert "ttftscope[trace]" in str(info.value) and "otlp_endpoint" in str(info.value)


def _record(**kw: object) -> RequestRecord:
    fields: dict[str, object] = {
        "run_id": "r",
        "index": 3,
        "variant": "chat",
        "phase": "warm",
        "ok": True,
        "t_wall": 1_700_000_000.0,
        "serialize_ms": 2.0,
        "connect_ms": 1.0,
        "headers_ms": 10.0,
        "first_event_ms": 11.0,
        "wire_ttft_ms": 15.0,
        "last_byte_ms": 30.0,
        "status": 200,
    }
    return RequestRecord.model_validate({**fields, **kw})


def test_a_client_span_carries_the_ids_sent_and_the_phases_as_events() -> None:
    ctx = new_context()
    sink = InMemorySpanExporter()
    em = open_emitter(None, environ={}, exporter=sink)
    assert em is not None
    em.emit("ttftscope", [client_span(_record(), ctx)])
    em.shutdown()
    (span,) = sink.get_finished_spans()
    assert format(span.context.trace_id, "032x") == ctx.trace_id
    assert format(span.context.span_id, "016x") == ctx.span_id
    assert span.parent is None and span.name == "request"
    t0 = 1_700_000_000 * 10**9
    assert span.start_time == t0 - 2_000_000 and span.end_time == t0 + 30_000_000
    events = {e.name: e.timestamp - t0 for e in span.events}
    assert events == {
        "serialize": 0,
        "connect": 1_000_000,
        "headers": 10_000_000,
        "first_byte": 11_000_000,
        "first_token": 15_000_000,
    }
    assert span.resource.attributes["service.name"] == "ttftscope"


def test_spans_reach_an_otlp_endpoint_with_the_standard_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=sekrit-123")
    ctx = new_context()
    with OtlpSink() as sink:
        em = open_emitter(sink.url, environ={})
        assert em is not None
        em.emit("ttftscope", [client_span(_record(ok=False, error_kind="timeout"), ctx)])
        em.shutdown()
    (export,) = sink.exports
    assert export.path == "/v1/traces"
    assert export.headers["x-collector-key"] == "sekrit-123"
    ((service, span),) = export.spans()
    assert service == "ttftscope" and span.trace_id.hex() == ctx.trace_id
    assert span.status.code == 2 and span.status.message == "timeout"  # ERROR
