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
Responses rules; imports only ``vllm_chat`` and the standard library.

>>> responses_to_chat({"input": "hi", "instructions": "Be brief."})["messages"]
[{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ttftscope.gateway.vllm_chat import ChatInputs, PassReason, PassThrough, prepare_chat

# ResponsesRequest.build_tok_params leaves TokenizeParams.add_special_tokens at its default
# (True), unlike chat (False): the rendered text is encoded with the post-processor's tokens.
ADD_SPECIAL_TOKENS: Final = True

_EFFORTS = frozenset("none minimal low medium high xhigh max".split())  # openai ReasoningEffort
_STATUSES = frozenset({"in_progress", "completed", "incomplete"})
_PARTIAL = frozenset({"in_progress", "incomplete"})
_MEDIA_PARTS = frozenset({"input_image", "input_file", "input_audio"})
_ROLES = frozenset({"user", "system", "developer"})
# Keys whose values vLLM's request models check: items with other keys are not reproduced.
_ROLE_KEYS = frozenset({"type", "role", "content", "status", "phase", "id"})
_CALL_KEYS = frozenset({"type", "call_id", "name", "arguments", "id", "status"})
_OUTPUT_KEYS = frozenset({"type", "call_id", "output", "id", "status"})
_REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content", "status"})
_OUTPUT_TEXT_KEYS = frozenset({"type", "text", "annotations", "logprobs"})
# built-in tools vLLM never renders for the model (without a --tool-server)
_DROPPED_TOOLS = frozenset({"web_search", "web_search_preview"})
_TOOL_KEYS: Final[dict[str, type]] = {
    "name": str,
    "description": str,
    "parameters": dict,
    "strict": bool,
    "defer_loading": bool,
}


def responses_to_chat(body: Mapping[str, Any]) -> dict[str, Any]:
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
    chat["messages"] = _messages(body)
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


def prepare_responses(body: Mapping[str, Any], template_source: str) -> ChatInputs:
    """The template inputs vLLM 0.32's ``/v1/responses`` renders for ``body``; or PassThrough.

    >>> src = "{{ messages[0].tool_calls[0].function | tojson }}"
    >>> i = prepare_responses({"input": [{"type": "function_call", "call_id": "c",
    ...     "name": "f", "arguments": '{"a": 1}'}]}, src)
    >>> i.messages[0]["tool_calls"]
    [{'id': 'c', 'function': {'name': 'f', 'arguments': {'a': 1}}, 'type': 'function'}]
    """
    return responses_inputs(responses_to_chat(body), template_source)


def responses_inputs(chat: Mapping[str, Any], template_source: str) -> ChatInputs:
    """:func:`prepare_responses` from a body :func:`responses_to_chat` already converted.

    >>> responses_inputs({"messages": [{"role": "user", "content": "hi"}]}, "x").messages
    [{'role': 'user', 'content': 'hi'}]
    """
    inputs = prepare_chat(chat, template_source)
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


def _one_of(value: Any, names: frozenset[str]) -> bool:
    return isinstance(value, str) and value in names  # JSON lists and objects are unhashable


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """construct_input_messages: instructions as a system message, then the input."""
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise PassThrough("invalid_request", "instructions is not a string")
    messages = [{"role": "system", "content": instructions}] if instructions else []
    raw = body.get("input")
    if isinstance(raw, str):
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise PassThrough("invalid_request", "input is neither text nor a list of items")
    _check_partial(raw)
    for item in raw:
        _add_item(messages, item)
    if not messages:
        # A 400 at render time ("empty conversation"), which forwarded ids would skip.
        raise PassThrough("invalid_request", "no instructions and no input items")
    return messages


def _check_partial(items: list[Any]) -> None:
    """should_continue_final_message: a last message or reasoning still in progress."""
    last = items[-1] if items else None
    if not isinstance(last, dict) or not _one_of(last.get("status"), _PARTIAL):
        return
    if last.get("type", "message") in ("message", "reasoning"):
        raise PassThrough("continue_final_message", f"last item status {last['status']!r}")


def _add_item(messages: list[dict[str, Any]], item: Any) -> None:
    """_construct_message_from_response_item: a new message, or one merged into the last."""
    if not isinstance(item, dict):
        raise PassThrough("invalid_request", "an input item is not an object")
    kind = item.get("type", "message")
    if kind == "message" and item.get("role") == "assistant":
        _merge(messages, "content", _assistant_text(item))
    elif kind == "message":
        messages.append(_role_message(item))
    elif kind == "function_call":
        _merge(messages, "tool_calls", _tool_call(item))
    elif kind == "function_call_output":
        messages.append(_tool_message(item))
    elif kind == "reasoning":
        _merge(messages, "reasoning", _reasoning_text(item))
    else:
        raise PassThrough("unsupported_item", f"input item of type {kind!r}")


def _merge(messages: list[dict[str, Any]], key: str, value: Any) -> None:
    """Into the previous assistant message while its ``key`` is unset; tool calls always."""
    prev = messages[-1] if messages and messages[-1]["role"] == "assistant" else None
    if key == "tool_calls":
        if prev is not None:
            prev.setdefault("tool_calls", []).append(value)
        else:
            messages.append({"role": "assistant", "tool_calls": [value]})
    elif prev is not None and prev.get(key) is None:
        prev[key] = value
    else:
        messages.append({"role": "assistant", key: value})


def _check_keys(item: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    if extra := sorted(item.keys() - allowed):
        raise PassThrough("unsupported_item", f"{what} with keys {extra}")
    # Not always a 400 (a message may validate as a type that keeps odd keys): not reproduced.
    if item.get("id") is not None and not isinstance(item["id"], str):
        raise PassThrough("unsupported_item", f"{what} id is not a string")
    if item.get("status") is not None and not _one_of(item["status"], _STATUSES):
        raise PassThrough("unsupported_item", f"{what} status {item['status']!r}")


def _role_message(item: dict[str, Any]) -> dict[str, Any]:
    """A user, system or developer item is kept as a chat message (only these keys vLLM reads).

    >>> _role_message({"type": "message", "role": "user",
    ...                "content": [{"type": "input_text", "text": "hi"}]})
    {'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}
    """
    _check_keys(item, _ROLE_KEYS, "a message")
    role = item.get("role")
    if not _one_of(role, _ROLES):
        raise PassThrough("unsupported_item", f"a message with role {role!r}")
    content = item.get("content")
    if isinstance(content, list):
        return {"role": role, "content": _input_text_parts(content)}
    if not isinstance(content, str):
        raise PassThrough("invalid_request", "message content is neither text nor parts")
    return {"role": role, "content": content}


def _input_text_parts(parts: list[Any]) -> list[dict[str, Any]]:
    """input_text parts as chat text parts: vLLM's chat parser reads them as text parts."""
    out = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if _one_of(kind, _MEDIA_PARTS):
            raise PassThrough("non_text_content", f"content part of type {kind!r}")
        if kind != "input_text" or not isinstance(part.get("text"), str):
            raise PassThrough("unsupported_item", f"content part of type {kind!r}")
        if part.keys() != {"type", "text"}:  # other keys would reach openai-format templates
            raise PassThrough("unsupported_item", f"content part keys {sorted(part)}")
        out.append({"type": "text", "text": part["text"]})
    return out


def _assistant_text(item: dict[str, Any]) -> str:
    """Text content as is; of output_text parts only the first one's text (content[0].text).

    >>> _assistant_text({"type": "message", "role": "assistant", "content": [
    ...     {"type": "output_text", "text": "a"}, {"type": "output_text", "text": "b"}]})
    'a'
    """
    _check_keys(item, _ROLE_KEYS, "an assistant message")
    if item.get("phase") not in (None, "commentary", "final_answer"):
        raise PassThrough("unsupported_item", f"phase {item['phase']!r}")
    content = item.get("content")
    if isinstance(content, str):
        return content
    # A list becomes a ResponseOutputMessage only with an explicit type and valid parts.
    if not isinstance(content, list) or not content or "type" not in item:
        raise PassThrough("unsupported_item", "assistant content is not output_text parts")
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "output_text"):
            raise PassThrough("unsupported_item", "assistant content is not output_text parts")
        plain = part.get("annotations", []) == [] and part.get("logprobs") in (None, [])
        if part.keys() - _OUTPUT_TEXT_KEYS or not plain or not isinstance(part.get("text"), str):
            raise PassThrough("unsupported_item", f"output_text part keys {sorted(part)}")
    text: str = content[0]["text"]
    return text


def _tool_call(item: dict[str, Any]) -> dict[str, Any]:
    """A function_call item as a chat tool call (call_id becomes the id)."""
    _check_keys(item, _CALL_KEYS, "a function_call")
    fields = (item.get("call_id"), item.get("name"), item.get("arguments"))
    if not all(isinstance(f, str) for f in fields):
        raise PassThrough("invalid_request", "a function_call lacks call_id, name or arguments")
    function = {"name": item["name"], "arguments": item["arguments"]}
    return {"id": item["call_id"], "type": "function", "function": function}


def _tool_message(item: dict[str, Any]) -> dict[str, Any]:
    """A function_call_output item as a tool message; a missing call_id stays None."""
    _check_keys(item, _OUTPUT_KEYS, "a function_call_output")
    call_id = item.get("call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise PassThrough("invalid_request", "call_id is not a string")
    output = item.get("output")
    if isinstance(output, list):
        output = _input_text_parts(output)
    elif not isinstance(output, str):
        raise PassThrough("invalid_request", "output is neither text nor parts")
    return {"role": "tool", "content": output, "tool_call_id": call_id}


def _reasoning_text(item: dict[str, Any]) -> str:
    """The first content text, else the first summary text, else ""; encrypted → 400.

    >>> _reasoning_text({"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]})
    's'
    """
    _check_keys(item, _REASONING_KEYS, "a reasoning item")
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise PassThrough("unsupported_item", "encrypted_content is not a string")
    summary = _reasoning_parts(item.get("summary"), "summary_text")
    content = _reasoning_parts(item.get("content", []), "reasoning_text")
    if encrypted:
        raise PassThrough("invalid_request", "vLLM does not support encrypted reasoning content")
    return content[0] if content else summary[0] if summary else ""


def _reasoning_parts(parts: Any, kind: str) -> list[str]:
    if parts is None and kind == "reasoning_text":
        return []
    if not isinstance(parts, list):
        raise PassThrough("unsupported_item", f"reasoning {kind} is not a list")
    for part in parts:
        ok = isinstance(part, dict) and part.keys() == {"type", "text"}
        if not ok or part["type"] != kind or not isinstance(part["text"], str):
            raise PassThrough("unsupported_item", f"a reasoning part is not plain {kind}")
    return [part["text"] for part in parts]


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


def _tool(tool: Any) -> dict[str, Any]:
    kind = tool.get("type") if isinstance(tool, dict) else None
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
    if effort is not None and not _one_of(effort, _EFFORTS):
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
