"""The token-id gateway: one OpenAI-compatible address in front of many models.

Laid out as vLLM lays out its ``entrypoints/``, one folder per API over named shared layers
(top to bottom; ``lint-imports`` holds them):

- ``serve``, ``app`` and ``routing``: how it runs, the one routing table, the one request
  handler every route goes through;
- ``proving``: the start-up conformance check of every API's conversion on each upstream;
- ``apis``: ``chat``, ``completions``, ``messages``, ``responses``, each its endpoint and its
  conversion to vLLM's chat body (``native``: what messages and responses share);
- ``state``: the :class:`~ttftscope.gateway.state.Gateway` the APIs share (key, body,
  routing by model, counts);
- ``pipeline``: the id pipeline (upstreams, vLLM's chat rewrites, render, session cache,
  encode, verify, forward);
- ``runtime``: the thread pool, worker processes, heap and host tuning;
- ``transport``: ASGI, bounds, deadline, the upstream HTTP/1.1 client (``hop``), trace
  stamps, errors in each API's format, exact JSON;
- ``metrics`` (its own Prometheus registry) and ``clientconfig`` (what to paste into an
  agent).

May import ``client``, ``tokenization``, ``tracing``, ``config``, ``records``, ``errors`` and
``stats``; never another capability.
"""
