"""vLLM's ``llm_request`` span as the server's figures of one request, in ms.

vLLM (V1, 0.32; ``vllm/v1/engine/output_processor.py``, ``do_tracing``) makes one span per
finished request when started with ``--otlp-traces-endpoint``, whether or not the request
carried a ``traceparent`` (without one the span starts a trace of its own). The span starts at
the API server's arrival time and ends when the output processor sees the request finish.
Its latency attributes are seconds, from the same timestamps as the ``/metrics`` histograms:

- ``gen_ai.latency.time_to_first_token``: arrival to first token
  (``vllm:time_to_first_token_seconds``)
- ``gen_ai.latency.time_in_queue``: queued to scheduled (``vllm:request_queue_time_seconds``)
- ``gen_ai.latency.time_in_model_prefill``: scheduled to first token
  (``vllm:request_prefill_time_seconds``)
- ``gen_ai.latency.time_in_model_decode``: first to last token
- ``gen_ai.latency.e2e``: arrival to the finishing iteration

``gen_ai.request.id`` is the id the endpoint made from ``X-Request-Id``: ``chatcmpl-<id>`` on
``/v1/chat/completions``, ``cmpl-<id>-<n>`` on ``/v1/completions`` (``n`` = prompt index);
the engine's own ``-<8 random chars>`` suffix is not in it (it keeps the external id).

>>> from ttftscope.tracing.otlpdecode import Span
>>> span = Span("ab" * 16, "cd" * 8, None, "llm_request", "vllm", 0, 1, {
...     "gen_ai.latency.time_in_queue": 0.002, "gen_ai.latency.time_to_first_token": 0.0305,
...     "gen_ai.request.id": "chatcmpl-" + "ef" * 16})
>>> t = vllm_timing(span)
>>> t.queue_ms, t.server_ttft_ms, t.sent_request_id
(2.0, 30.5, 'efefefefefefefefefefefefefefefef')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ttftscope.tracing.names import VLLM_SPAN
from ttftscope.tracing.otlpdecode import AttrValue, Span

QUEUE = "gen_ai.latency.time_in_queue"
TTFT = "gen_ai.latency.time_to_first_token"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
E2E = "gen_ai.latency.e2e"
REQUEST_ID = "gen_ai.request.id"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
# what vLLM's endpoints wrap X-Request-Id in: an optional "<kind>-" prefix (chatcmpl-, cmpl-,
# generate-tokens-) and, on /v1/completions, a "-<prompt index>" suffix
_WRAPPED = re.compile(r"^(?:[A-Za-z_]+(?:-[A-Za-z_]+)*-)?(?P<id>[0-9a-f]{32})(?:-\d+)?$")


@dataclass(frozen=True)
class VllmTiming:
    """The server's figures of one request from its ``llm_request`` span."""

    trace_id: str
    request_id: str | None  # gen_ai.request.id as vLLM wrote it
    server_ttft_ms: float | None
    queue_ms: float | None
    prefill_ms: float | None
    decode_ms: float | None
    e2e_ms: float | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def sent_request_id(self) -> str | None:
        """The ``X-Request-Id`` the client sent, when it was one of our 32-hex ids."""
        return sent_request_id(self.request_id)

    @property
    def frontend_ms(self) -> float | None:
        """Server TTFT − queue − prefill: rendering, tokenization, IPC (as the histograms)."""
        if None in (self.server_ttft_ms, self.queue_ms, self.prefill_ms):
            return None
        assert self.server_ttft_ms is not None and self.queue_ms is not None
        assert self.prefill_ms is not None
        return self.server_ttft_ms - self.queue_ms - self.prefill_ms


def sent_request_id(vllm_request_id: str | None) -> str | None:
    """Our 32-hex ``X-Request-Id`` inside the id vLLM built from it, else None.

    >>> sent_request_id("cmpl-" + "0a" * 16 + "-0"), sent_request_id("chatcmpl-abc")
    ('0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a', None)
    """
    if vllm_request_id is None:
        return None
    match = _WRAPPED.match(vllm_request_id)
    return None if match is None else match["id"]


def vllm_timing(span: Span) -> VllmTiming | None:
    """The figures of a vLLM ``llm_request`` span; None for any other span."""
    if span.name != VLLM_SPAN:
        return None
    attrs = span.attributes
    request_id = attrs.get(REQUEST_ID)
    return VllmTiming(
        trace_id=span.trace_id,
        request_id=request_id if isinstance(request_id, str) else None,
        server_ttft_ms=_ms(attrs.get(TTFT)),
        queue_ms=_ms(attrs.get(QUEUE)),
        prefill_ms=_ms(attrs.get(PREFILL)),
        decode_ms=_ms(attrs.get(DECODE)),
        e2e_ms=_ms(attrs.get(E2E)),
        prompt_tokens=_int(attrs.get(PROMPT_TOKENS)),
        completion_tokens=_int(attrs.get(COMPLETION_TOKENS)),
    )


def _ms(seconds: AttrValue) -> float | None:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return seconds * 1000.0 if math.isfinite(seconds) else None


def _int(value: AttrValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
