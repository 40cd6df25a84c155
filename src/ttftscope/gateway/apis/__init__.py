"""The gateway's APIs, one folder each, as vLLM lays out its ``entrypoints/``.

Each folder holds its API's endpoint (``endpoint``), its conversion to the chat body vLLM
derives from it (``convert``, with vLLM's own conversion reproduced beside it) and what only
it needs. Each gets the exact ids over the shared id path (:mod:`ttftscope.gateway.pipeline`)
and sends the request upstream to the same API with the ids, or as text when that cannot be
reproduced:

- ``chat``: ``/v1/chat/completions`` (chat-ids, or translated to ``/v1/completions``);
- ``completions``: ``/v1/completions`` (a text prompt encoded, ids spliced in);
- ``messages``: ``/v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic: Claude Code);
- ``responses``: ``/v1/responses`` (OpenAI Responses: Codex) and the stored responses.

The folders never import each other (``lint-imports``); what messages and responses share,
an API vLLM serves itself sent with ids, is :mod:`~ttftscope.gateway.apis.native`.
"""
