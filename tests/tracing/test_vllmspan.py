"""vLLM's llm_request span read as ms, and the request ids vLLM builds from X-Request-Id."""

from __future__ import annotations

import pytest

from ttftscope.tracing.otlpdecode import Span
from ttftscope.tracing.vllmspan import sent_request_id, vllm_timing

SENT = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("vllm_id", "expected"),
    [
        (f"chatcmpl-{SENT}", SENT),  # /v1/chat/completions
        (f"cmpl-{SENT}-0", SENT),  # /v1/completions, first prompt
        (f"generate-tokens-{SENT}", SENT),
        (SENT, SENT),
        ("chatcmpl-8f3c0e6a2b1d4c5e", None),  # vLLM's own random id: not one we sent
        (f"chatcmpl-{SENT}x", None),
        (None, None),
    ],
)
def test_the_sent_id_is_found_inside_vllms_id(vllm_id: str | None, expected: str | None) -> None:
    assert sent_request_id(vllm_id) == expected


def test_seconds_become_ms_and_missing_or_odd_values_none() -> None:
    span = Span(
        SENT,
        "cd" * 8,
        None,
        "llm_request",
        "vllm",
        0,
        1,
        {
            "gen_ai.latency.time_to_first_token": 0.25,
            "gen_ai.latency.time_in_queue": 0,
            "gen_ai.latency.time_in_model_prefill": "0.1",
            "gen_ai.latency.time_in_model_decode": True,
            "gen_ai.latency.e2e": float("nan"),
            "gen_ai.usage.completion_tokens": 16,
        },
    )
    t = vllm_timing(span)
    assert t is not None
    assert (t.server_ttft_ms, t.queue_ms, t.prefill_ms, t.decode_ms, t.e2e_ms) == (
        250.0,
        0.0,
        None,
        None,
        None,
    )
    assert (t.completion_tokens, t.frontend_ms, t.request_id) == (16, None, None)


def test_other_spans_are_not_vllm_timings() -> None:
    assert vllm_timing(Span(SENT, "cd" * 8, None, "gateway", "ttftscope-gateway", 0, 1)) is None
