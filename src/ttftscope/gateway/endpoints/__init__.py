"""The gateway's endpoints, one module each, as vLLM lays out its ``entrypoints/``.

Each takes its API's request, turns it into the chat body vLLM derives from it, gets the
exact ids over the shared id path (:mod:`~ttftscope.gateway.idpath`) and sends the request
upstream to the same API with the ids, or as text when that cannot be reproduced:

- ``chat``: ``/v1/chat/completions`` (chat-ids, or translated to ``/v1/completions``);
- ``completions``: ``/v1/completions`` (a text prompt encoded, ids spliced in);
- ``messages``: ``/v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic: Claude Code);
- ``responses``: ``/v1/responses`` (OpenAI Responses: Codex).
"""
