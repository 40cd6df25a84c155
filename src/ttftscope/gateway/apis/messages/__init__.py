"""``/v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic: Claude Code): the
endpoints, vLLM's Anthropic → chat conversion reproduced, and how it runs on one upstream."""
