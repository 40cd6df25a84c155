"""The token-id gateway: one OpenAI-compatible address in front of many models.

Owns: routing by model to upstreams, vLLM's chat preprocessing reproduced as a named stage
(``vllm_chat``), the session cache of incremental encoders (``sessions``), chat ↔
completions translation for upstreams without chat ids (``translate``), the upstream
HTTP/1.1 client (``hop``), its own Prometheus metrics (``metrics``) and the Starlette app
(``app``). May import ``client``,
``tokenization``, ``config``, ``records``, ``errors`` and ``stats``; never another capability.
"""
