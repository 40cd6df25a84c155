"""Traces: W3C trace context we send, and (with the ``trace`` extra) spans we emit and read.

The context (:mod:`~ttftscope.tracing.context`) needs nothing beyond the standard library,
so every request carries ``traceparent`` and ``X-Request-Id`` at no cost; spans are only
built when tracing is on.
"""

from ttftscope.tracing.context import TraceContext, new_context, parse_traceparent, with_trace

__all__ = ["TraceContext", "new_context", "parse_traceparent", "with_trace"]
