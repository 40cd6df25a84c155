"""The names our spans carry, shared by what emits them and what reads them back.

A trace of one request through the gateway is: the client's ``request`` span (service
``ttftscope``), the gateway's ``gateway`` span (service ``ttftscope-gateway``) with one child
per stage of its own work, and vLLM's ``llm_request`` span (service as vLLM names it).

>>> GATEWAY_STAGES
('parse', 'rewrite', 'render', 'encode', 'upstream')
"""

from __future__ import annotations

from typing import Final

CLIENT_SERVICE: Final = "ttftscope"
GATEWAY_SERVICE: Final = "ttftscope-gateway"
CLIENT_SPAN: Final = "request"
GATEWAY_SPAN: Final = "gateway"
VLLM_SPAN: Final = "llm_request"
# the gateway's children of GATEWAY_SPAN, in the order they run
GATEWAY_STAGES: Final = ("parse", "rewrite", "render", "encode", "upstream")
# attributes of the encode span: tokens taken from the session cache / encoded now
REUSED_TOKENS: Final = "ttftscope.tokens.reused"
ENCODED_TOKENS: Final = "ttftscope.tokens.encoded"
# events of the client span and of the gateway's upstream span
FIRST_BYTE: Final = "first_byte"
FIRST_TOKEN: Final = "first_token"
