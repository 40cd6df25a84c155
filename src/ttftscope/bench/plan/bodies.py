"""One request of a synthetic session, written as the body of each API it can be sent as.

A :class:`Prompt` is API-neutral: a system prompt (none when empty), tool definitions and
the conversation as user and assistant texts. :func:`build_body` writes it for an
:data:`~ttftscope.client.apis.Api` as that API's own clients do:

- ``chat``: a system message, then the conversation; function tools; ``max_tokens``;
- ``messages`` (Claude Code): ``system`` as a text block, user and assistant messages of
  text blocks, tools with ``input_schema``, ``max_tokens`` (the API requires it);
- ``responses`` (Codex): ``instructions``, ``input`` message items of ``input_text`` /
  ``output_text`` parts, function tools, ``max_output_tokens`` and ``store: false`` (the
  whole input goes every turn, nothing is kept on the server).

Tools go with ``tool_choice`` "none" in each API's spelling: the server renders them into
the prompt as it does an agent's (vLLM drops them only under
``--exclude-tools-when-tool-choice-none``), but needs no tool-call parser to accept them
(vLLM refuses the default "auto" without ``--enable-auto-tool-choice``). An agent's own
"auto" goes with ``--extra-body`` on a server that takes it (``{"tool_choice": "auto"}``;
Anthropic's ``{"tool_choice": {"type": "auto"}}``).

Every body then gets the run's sampling and ``--extra-body`` on top.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ttftscope.client.apis import Api

Body = dict[str, object]
Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class BodyDefaults:
    """What every request body gets: the API it is written for, model, sampling, extras.

    ``force_max_tokens`` (``--max-tokens`` given) also replaces a replayed body's own limit.
    """

    model: str
    max_tokens: int
    temperature: float
    force_max_tokens: bool = False
    extra: Mapping[str, object] | None = None
    api: Api = "chat"


@dataclass(frozen=True)
class Message:
    """One turn of the conversation: who says it and its text."""

    role: Role
    text: str


@dataclass(frozen=True)
class Tool:
    """One tool definition: name, description and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, object]


@dataclass(frozen=True)
class Prompt:
    """What one request says, in no API's format yet."""

    system: str
    tools: tuple[Tool, ...]
    messages: tuple[Message, ...]


def chat_body(prompt: Prompt, limit: int) -> Body:
    """The OpenAI chat completions body of ``prompt`` (sampling and extras not yet added).

    >>> b = chat_body(Prompt("s", (), (Message("user", "hi"),)), 16)
    >>> b["messages"], b["max_tokens"]
    ([{'role': 'system', 'content': 's'}, {'role': 'user', 'content': 'hi'}], 16)
    """
    system = [{"role": "system", "content": prompt.system}] if prompt.system else []
    messages = [*system, *({"role": m.role, "content": m.text} for m in prompt.messages)]
    body: Body = {"messages": messages, "max_tokens": limit}
    if prompt.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in prompt.tools
        ]
        body["tool_choice"] = "none"
    return body


def messages_body(prompt: Prompt, limit: int) -> Body:
    """The Anthropic Messages body of ``prompt``, as Claude Code writes one.

    >>> b = messages_body(Prompt("s", (Tool("Read", "r", {}),), (Message("user", "hi"),)), 16)
    >>> b["system"], b["messages"][0]["content"], b["tools"][0]["input_schema"], b["max_tokens"]
    ([{'type': 'text', 'text': 's'}], [{'type': 'text', 'text': 'hi'}], {}, 16)
    """
    body: Body = {"system": [{"type": "text", "text": prompt.system}]} if prompt.system else {}
    body["messages"] = [
        {"role": m.role, "content": [{"type": "text", "text": m.text}]} for m in prompt.messages
    ]
    body["max_tokens"] = limit
    if prompt.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in prompt.tools
        ]
        body["tool_choice"] = {"type": "none"}
    return body


def _input_item(m: Message) -> dict[str, object]:
    part = "input_text" if m.role == "user" else "output_text"
    return {"type": "message", "role": m.role, "content": [{"type": part, "text": m.text}]}


def responses_body(prompt: Prompt, limit: int) -> Body:
    """The OpenAI Responses body of ``prompt``, as Codex writes one (``store: false``).

    >>> b = responses_body(Prompt("s", (), (Message("user", "hi"), Message("assistant", "ok"))), 8)
    >>> b["instructions"], [i["content"][0]["type"] for i in b["input"]], b["store"]
    ('s', ['input_text', 'output_text'], False)
    """
    body: Body = {"instructions": prompt.system} if prompt.system else {}
    body["input"] = [_input_item(m) for m in prompt.messages]
    body["max_output_tokens"] = limit
    body["store"] = False
    if prompt.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            }
            for t in prompt.tools
        ]
        body["tool_choice"] = "none"
    return body


_BUILDERS: Mapping[Api, Callable[[Prompt, int], Body]] = {
    "chat": chat_body,
    "messages": messages_body,
    "responses": responses_body,
}


def build_body(prompt: Prompt, defaults: BodyDefaults) -> Body:
    """``prompt`` as a request body of ``defaults.api``, with model, sampling and extras.

    >>> d = BodyDefaults("m", 216, 0.0, api="responses", extra={"reasoning": {"effort": "low"}})
    >>> b = build_body(Prompt("s", (), (Message("user", "hi"),)), d)
    >>> b["model"], b["max_output_tokens"], b["temperature"], b["reasoning"]
    ('m', 216, 0.0, {'effort': 'low'})
    """
    body: Body = {"model": defaults.model}
    body.update(_BUILDERS[defaults.api](prompt, defaults.max_tokens))
    body["temperature"] = defaults.temperature
    body.update(defaults.extra or {})
    return body
