"""``/v1/chat/completions``: the endpoint, the chat API's conversion (the body is vLLM's
chat body already) and chat ↔ completions translation for upstreams without chat ids."""
