"""``/v1/responses`` (OpenAI Responses: Codex): the endpoint, vLLM's Responses → chat
conversion reproduced, and the stored responses fetched from the upstream that made them."""
