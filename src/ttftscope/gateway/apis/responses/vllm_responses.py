"""vLLM 0.32's Responses API → chat conversion, reproduced: a ``/v1/responses`` body in, chat out.

vLLM renders a Responses request as chat messages
(``entrypoints/openai/responses/utils.py::construct_input_messages``) through its chat renderer
(``renderers/online_renderer.py::OnlineRenderer.render_responses``). :func:`responses_to_chat`
builds the chat body that ``vllm_chat.prepare_chat`` turns into the same template inputs;
:func:`prepare_responses` does both and restores vLLM's key order in tool-call functions. The
rendered prompt, encoded with special tokens (:data:`ADD_SPECIAL_TOKENS`), can go to vLLM's
``/v1/responses`` in ``kv_transfer_params.prompt_token_ids``. Non-harmony models only (for
``gpt_oss`` vLLM renders Harmony and ignores the ids); server flags as ``vllm_chat`` assumes.

What is not reproduced exactly, or is state the server keeps, raises ``PassThrough``. Owns the
request-level Responses rules (flags, tools, tool_choice, reasoning, template kwargs); the input
items as chat messages are ``vllm_responses_items``.

>>> responses_to_chat({"input": "hi", "instructions": "Be brief."})["messages"]
[{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ttftscope.gateway.apis.responses.vllm_responses_items import one_of, responses_messages
from ttftscope.gateway.pipeline.passthrough import PassReason, PassThrough
from ttftscope.gateway.pipeline.profiles import BASELINE, Profile
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs, prepare_chat

# ResponsesRequest.build_tok_params leaves TokenizeParams.add_special_tokens at its default
# (True), unlike chat (False): the rendered text is encoded with the post-processor's tokens.
ADD_SPECIAL_TOKENS: Final = True

_EFFORTS = frozenset("none minimal low medium high xhigh max".split())  # openai ReasoningEffort
# built-in tools vLLM never renders for the model (without a --tool-server)
_DROPPED_TOOLS = frozenset({"web_search", "web_search_preview"})
_TOOL_KEYS: Final[dict[str, type]] = {
    "name": str,
    "description": str,
    "parameters": dict,
    "strict": bool,
    "defer_loading": bool,
}


def responses_to_chat(body: Mapping[str, Any], profile: Profile = BASELINE) -> dict[str, Any]:
    """The chat body whose rendering is the prompt vLLM 0.32's ``/v1/responses`` renders.

    Only what reaches the template is kept. Tool-call functions come out of
    ``prepare_chat`` as ``{arguments, name}``; vLLM's are ``{name, arguments}``
    (:func:`prepare_responses` restores that). The body is not changed.

    >>> chat = responses_to_chat({"input": [
    ...     {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
    ...     {"type": "function_call_output", "call_id": "c1", "output": "a.py"}]})
    >>> chat["messages"][0]["tool_calls"][0]["function"]
    {'name': 'ls', 'arguments': '{}'}
    >>> chat["messages"][1]
    {'role': 'tool', 'content': 'a.py', 'tool_call_id': 'c1'}
    """
    if not isinstance(body, Mapping):
        raise PassThrough("invalid_request", "the body is not a JSON object")
    _check_request(body)
    tools = _tools(body.get("tools"))
    chat: dict[str, Any] = {"model": body["model"]} if "model" in body else {}
    chat["messages"] = responses_messages(body)
    if tools:
        chat["tools"] = tools
    choice = _tool_choice(body.get("tool_choice", "auto"), tools)
    if choice is not None:
        chat["tool_choice"] = choice
    effort = _effort(body.get("reasoning"))
    if effort is not None:
        chat["reasoning_effort"] = effort
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None:
        chat["chat_template_kwargs"] = _template_kwargs(kwargs)
    return chat


def prepare_responses(
    body: Mapping[str, Any], template_source: str, profile: Profile = BASELINE
) -> ChatInputs:
    """The template inputs vLLM 0.32's ``/v1/responses`` renders for ``body``; or PassThrough.

    >>> src = "{{ messages[0].tool_calls[0].function | tojson }}"
    >>> i = prepare_responses({"input": [{"type": "function_call", "call_id": "c",
    ...     "name": "f", "arguments": '{"a": 1}'}]}, src)
    >>> i.messages[0]["tool_calls"]
    [{'id': 'c', 'function': {'name': 'f', 'arguments': {'a': 1}}, 'type': 'function'}]
    """
    return responses_inputs(responses_to_chat(body, profile), template_source, profile)


def responses_inputs(
    chat: Mapping[str, Any], template_source: str, profile: Profile = BASELINE
) -> ChatInputs:
    """:func:`prepare_responses` from a body :func:`responses_to_chat` already converted.

    >>> responses_inputs({"messages": [{"role": "user", "content": "hi"}]}, "x").messages
    [{'role': 'user', 'content': 'hi'}]
    """
    inputs = prepare_chat(chat, template_source, profile)
    return ChatInputs(
        [_vllm_order(m) for m in inputs.messages], inputs.tools, inputs.template_kwargs
    )


def _vllm_order(message: dict[str, Any]) -> dict[str, Any]:
    # utils.py builds each function as FunctionCallTool(name=..., arguments=...); vLLM later
    # replaces arguments in place, so that order is what a template serializing it sees.
    calls = message.get("tool_calls")
    if not calls:
        return message
    ordered = [
        {
            k: {"name": v["name"], "arguments": v["arguments"]} if k == "function" else v
            for k, v in call.items()
        }
        for call in calls
    ]
    return {**message, "tool_calls": ordered}


def _check_request(body: Mapping[str, Any]) -> None:
    """Request fields that make forwarded ids wrong or ignored, or need server state."""
    flags: tuple[tuple[str, tuple[Any, ...], PassReason], ...] = (
        ("previous_response_id", (None,), "stateful"),
        ("conversation", (None,), "stateful"),  # not a vLLM field: it would be ignored
        ("previous_input_messages", (None,), "stateful"),  # read for harmony models only
        ("store", (None, False), "stateful"),  # absent: vLLM stores only when enabled
        ("background", (None, False), "stateful"),
        ("kv_transfer_params", (None,), "kv_transfer_params"),
        # vLLM keeps unknown fields and _reused_prompt_token_ids reads request.echo.
        ("echo", (None, False), "echo"),
        # The prompt text it returns is empty when vLLM was given ids.
        ("enable_response_messages", (None, False), "return_prompt_text"),
        # Anything but "disabled" (null too) truncates; forwarded ids skip truncation.
        ("truncation", ("disabled",), "truncate_prompt_tokens"),
        ("prompt", (None,), "invalid_request"),  # ResponsesRequest.validate_prompt
    )
    for key, neutral, reason in flags:
        # ``is`` for True/False/None: a lax value such as "false" or 0 is not reproduced.
        if key in body and not any(_same(body[key], v) for v in neutral):
            raise PassThrough(reason, f"{key}={body[key]!r}")


def _same(value: Any, neutral: Any) -> bool:
    return value is neutral or (isinstance(neutral, str) and value == neutral)


def _tools(raw: Any) -> list[dict[str, Any]]:
    """Function tools as chat tools (construct_tool_dicts → FunctionDefinition), in request
    order: a namespace's functions flattened to ``<namespace>__<name>``, web search dropped
    (``tool_parsers/utils.py::get_function_tools``; no ``--tool-server`` assumed)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PassThrough("invalid_request", "tools is not a list")
    out: list[dict[str, Any]] = []
    for tool in raw:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "namespace":
            out += _namespace_tools(tool)
        elif not (isinstance(kind, str) and kind in _DROPPED_TOOLS):
            out.append(_tool(tool))
    if raw and not out:  # vLLM would render an empty tool list: not reproduced
        raise PassThrough("unsupported_item", "no function tool among the tools")
    return out


def _namespace_tools(tool: dict[str, Any]) -> list[dict[str, Any]]:
    name, tools = tool.get("name"), tool.get("tools")
    if not isinstance(name, str) or not isinstance(tools, list):
        raise PassThrough("invalid_request", "a namespace tool needs a name and tools")
    if extra := sorted(tool.keys() - {"type", "name", "description", "tools"}):
        raise PassThrough("unsupported_item", f"namespace tool keys {extra}")
    inner = [t for t in tools if not (isinstance(t, dict) and t.get("type") != "function")]
    if len(inner) != len(tools):  # vLLM drops them; their validation is not reproduced
        raise PassThrough("unsupported_item", f"a non-function tool in namespace {name!r}")
    for t in inner:
        if not isinstance(t.get("name"), str):
            raise PassThrough("invalid_request", f"a tool of namespace {name!r} has no name")
    return [_tool({**t, "name": f"{name}__{t['name']}"}) for t in inner]


def _custom_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A freeform (``custom``) tool as the one-string function vLLM shows the model
    (``tool_parsers/utils.py::custom_tool_as_function_dict``); a grammar is vLLM's 400."""
    if extra := sorted(tool.keys() - {"type", "name", "description", "format"}):
        raise PassThrough("unsupported_item", f"custom tool keys {extra}")
    fmt = tool.get("format")
    if not (fmt is None or fmt == {"type": "text"}):
        raise PassThrough("invalid_request", "a custom tool with a grammar format")
    shim = {
        "type": "object",
        "properties": {
            "input": {"type": "string", "description": "The freeform text payload for this tool."}
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    fn = {"type": "function", "name": tool.get("name"), "description": tool.get("description")}
    return _tool({**fn, "parameters": shim})


def _tool(tool: Any) -> dict[str, Any]:
    kind = tool.get("type") if isinstance(tool, dict) else None
    if kind == "custom":
        return _custom_tool(tool)
    if kind != "function":  # custom, namespace and built-in tools are rendered otherwise
        raise PassThrough("unsupported_item", f"tool of type {kind!r}")
    if extra := sorted(tool.keys() - _TOOL_KEYS.keys() - {"type"}):
        raise PassThrough("unsupported_item", f"function tool keys {extra}")
    if not isinstance(tool.get("name"), str):
        raise PassThrough("invalid_request", "a function tool has no name")
    # Exact types only: pydantic would coerce some values (e.g. "true" for strict).
    if any(
        tool[k] is not None and not isinstance(tool[k], t)
        for k, t in _TOOL_KEYS.items()
        if k in tool
    ):
        raise PassThrough("unsupported_item", f"tool {tool['name']!r} has a field vLLM coerces")
    return {"type": "function", "function": {k: tool[k] for k in _TOOL_KEYS if k in tool}}


def _tool_choice(choice: Any, tools: list[dict[str, Any]]) -> Any:
    """ResponsesRequest.check_tool_usage; the choice itself never changes the render."""
    named = isinstance(choice, dict) and choice.get("type") in ("function", "custom")
    if not tools:
        if choice in ("auto", "none"):
            return None  # vLLM makes it "none"; the chat body then carries none
        if choice == "required" or named:
            raise PassThrough("invalid_request", f"tool_choice {choice!r} without tools")
    elif choice in ("auto", "none", "required"):
        return choice
    elif named and choice["type"] == "function":
        name = choice.get("name")
        if not name or all(t["function"]["name"] != name for t in tools):
            raise PassThrough("invalid_request", f"tool_choice names no given tool: {name!r}")
        return {"type": "function", "function": {"name": name}}
    raise PassThrough("unsupported_item", f"tool_choice {choice!r}")


def _effort(reasoning: Any) -> Any:
    """reasoning.effort becomes the template's reasoning_effort (and enable_thinking)."""
    if reasoning is None:
        return None
    if not isinstance(reasoning, dict):
        raise PassThrough("invalid_request", "reasoning is not an object")
    effort = reasoning.get("effort")
    if effort is not None and not one_of(effort, _EFFORTS):
        raise PassThrough("invalid_request", f"reasoning effort {effort!r}")
    return effort


def _template_kwargs(kwargs: Any) -> dict[str, Any]:
    """The request's kwargs, which vLLM merges without dropping its null or "auto" values.

    (Chat drops them, so the chat body cannot carry them.)
    """
    if not isinstance(kwargs, dict):
        raise PassThrough("invalid_request", "chat_template_kwargs is not an object")
    if unset := sorted(k for k, v in kwargs.items() if v is None or v == "auto"):
        raise PassThrough("template_kwargs", f"chat_template_kwargs unset values {unset}")
    return dict(kwargs)
