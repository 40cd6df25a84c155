"""W3C trace context: what goes out parses back; what is not a context is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttftscope.errors import ConfigError
from ttftscope.tracing.context import new_context, parse_traceparent, with_trace

_HEX = "0123456789abcdef"


def test_new_context_round_trips_and_carries_the_trace_id_as_request_id() -> None:
    ctx = new_context()
    headers = ctx.headers()
    assert parse_traceparent(headers["traceparent"]) == ctx
    assert headers["X-Request-Id"] == ctx.trace_id
    child = ctx.child()
    assert child.trace_id == ctx.trace_id and child.span_id != ctx.span_id


@given(
    trace=st.text(_HEX, min_size=32, max_size=32).filter(lambda s: set(s) != {"0"}),
    span=st.text(_HEX, min_size=16, max_size=16).filter(lambda s: set(s) != {"0"}),
    flags=st.integers(0, 255),
)
def test_any_valid_traceparent_is_read_exactly(trace: str, span: str, flags: int) -> None:
    ctx = parse_traceparent(f"00-{trace}-{span}-{flags:02x}")
    assert (ctx.trace_id, ctx.span_id, ctx.sampled) == (trace, span, bool(flags & 1))


@pytest.mark.parametrize(
    "value",
    [
        "",
        "00-" + "0" * 32 + "-b7ad6b7169203331-01",  # all-zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01",
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # unknown version
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    ],
)
def test_a_malformed_traceparent_is_refused_saying_the_format(value: str) -> None:
    with pytest.raises(ConfigError, match="32 hex trace id"):
        parse_traceparent(value)


def test_with_trace_adds_a_new_context_and_keeps_every_other_header() -> None:
    sent, ctx, ours = with_trace({"Authorization": "Bearer k"})
    assert ctx is not None and ours
    assert sent == {
        "Authorization": "Bearer k",
        "traceparent": ctx.traceparent,
        "X-Request-Id": ctx.trace_id,
    }
    assert with_trace(None)[1] != with_trace(None)[1]  # a new trace per request


def test_the_callers_own_trace_headers_win_in_any_case() -> None:
    theirs = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    sent, ctx, ours = with_trace({"TRACEPARENT": theirs, "x-request-id": "job-7"})
    assert sent == {"TRACEPARENT": theirs, "x-request-id": "job-7"}
    assert ctx is not None and ctx.trace_id == "1" * 32 and not ours
    # a request id of their own, no traceparent: ours is added, their id kept
    sent, ctx, ours = with_trace({"X-Request-ID": "job-8"})
    assert ours and ctx is not None and sent["traceparent"] == ctx.traceparent
    assert sent["X-Request-ID"] == "job-8" and "X-Request-Id" not in sent


def test_a_callers_traceparent_that_is_not_w3c_goes_out_untouched_with_no_trace_id() -> None:
    sent, ctx, ours = with_trace({"traceparent": "whatever"})
    assert sent == {"traceparent": "whatever"} and ctx is None and not ours
