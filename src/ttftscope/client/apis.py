"""The streaming APIs a request can speak: where each is posted and what it adds to headers.

``chat`` is OpenAI chat completions; ``messages`` the Anthropic Messages API (what Claude
Code speaks); ``responses`` the OpenAI Responses API (what Codex speaks). vLLM 0.32 serves
all three. :class:`Api` is the one name for "which API" at every seam: the body builders,
the stream's event rules (:mod:`.events`, :mod:`.agentevents`) and the records' variant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

__all__ = ["APIS", "API_PATHS", "END_EVENTS", "Api", "api_headers", "parse_api"]

Api = Literal["chat", "messages", "responses"]
APIS: tuple[Api, ...] = get_args(Api)

# Below the base URL (``…/v1``), as every OpenAI- or Anthropic-compatible server mounts them.
API_PATHS: Mapping[Api, str] = {
    "chat": "/chat/completions",
    "messages": "/messages",
    "responses": "/responses",
}
# What ends a healthy stream of each API, for the message of a stream cut short.
END_EVENTS: Mapping[Api, str] = {
    "chat": "[DONE] or a finish_reason",
    "messages": "message_stop",
    "responses": "response.completed",
}
ANTHROPIC_VERSION = "2023-06-01"  # the version Claude Code sends


def api_headers(api: Api, api_key: str | None) -> dict[str, str]:
    """Headers an API's own clients send besides ``Authorization: Bearer``.

    Anthropic's clients send the key as ``x-api-key`` and name the API version; vLLM reads
    the Bearer token, Anthropic-compatible proxies the ``x-api-key``, so both go.

    >>> api_headers("messages", "k")
    {'anthropic-version': '2023-06-01', 'x-api-key': 'k'}
    >>> api_headers("chat", "k")
    {}
    """
    if api != "messages":
        return {}
    key = {"x-api-key": api_key} if api_key else {}
    return {"anthropic-version": ANTHROPIC_VERSION, **key}


def parse_api(text: str) -> Api:
    """``text`` as an :data:`Api`; :class:`ValueError` naming the choices otherwise.

    >>> parse_api(" Messages ")
    'messages'
    """
    by_name: dict[str, Api] = {a: a for a in APIS}
    found = by_name.get(text.strip().lower())
    if found is None:
        raise ValueError(f"{text!r} is not one of {', '.join(APIS)}")
    return found
