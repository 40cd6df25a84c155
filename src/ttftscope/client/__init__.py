"""Talking to an OpenAI-compatible server.

Owns: one streaming request timed in phases (``stream``), folding its SSE events into a
result (``events``; the Anthropic Messages and OpenAI Responses events in ``agentevents``),
the APIs a stream can speak and their paths (``apis``), SSE decoding (``sse``), failure
classification (``classify``), httpx's exceptions in the neutral transport-failure vocabulary
(``httpx_faults``), non-streaming JSON calls with retries (``http_json``), the
connectivity check (``ping``) and the endpoint a run talks to (``endpoint``). May import
``config``, ``records``, ``errors`` and ``stats``; never ``metrics`` or ``tokenization``.
"""
