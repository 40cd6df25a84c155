"""The id pipeline every API shares: a chat body in vLLM's form → rendered prompt → exact ids.

The upstreams and what is known of each (``upstreams``, ``modelfacts``, ``profiles``, the
proven ``shapes``), vLLM's chat rewrites (``vllm_chat``, ``vllm_chat_messages``,
``template_info``), the stages in order (``idpath``: convert → render → encode →
verify), the session cache (``sessions``), verification (``verify``), what a
conversion raises when it cannot reproduce a request (``passthrough``), the fields checked
before the upstream (``inputpolicy``) and the last stage, forwarding and relaying
(``forward``). Imports the transport and runtime layers, never an API.
"""
