"""Traces: W3C trace context we send, and (with the ``trace`` extra) spans we emit and read.

The context (:mod:`~ttftscope.tracing.context`) needs nothing beyond the standard library,
so every request carries ``traceparent`` and ``X-Request-Id`` at no cost; spans are only
built when tracing is on.

Reading: :mod:`~ttftscope.tracing.receiver` (an OTLP/HTTP receiver on 127.0.0.1) fills a
:mod:`~ttftscope.tracing.store`; :mod:`~ttftscope.tracing.otlpdecode` reads export bodies into
:class:`~ttftscope.tracing.otlpdecode.Span`; :mod:`~ttftscope.tracing.vllmspan` reads vLLM's
``llm_request`` span; :mod:`~ttftscope.tracing.join` fills records from their trace's spans.
Importing them needs only the standard library; decoding a body needs ``opentelemetry-proto``
(the extra). Each name is imported from the module that defines it.
"""
