"""Chat bodies for the oracle: the e2e tier's hand-written and seeded ones, and new shapes.

New shapes cover the rows of ``shared/notes/vllm-versions.md`` that reach chat: ``tools: []``
with each tool_choice, reasoning history under ``reasoning`` and ``reasoning_content``,
every ``reasoning_effort`` value (unknown ones too), images, system and developer messages
anywhere, parallel tool calls and non-ASCII text.
"""

from __future__ import annotations

import random
from typing import Any

from tests.e2e.test_vllm_rendering import TOOLS, call, fixed_cases, random_body

Body = dict[str, Any]
SEEDED = 100  # the e2e tier's seeded conversations
NEW_SEEDED = 40  # seeded conversations with this module's shapes mixed in
USER: Body = {"role": "user", "content": "hi"}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "huge")
NON_ASCII = "Ünïcödé 日本語 한국어 العربية 🙂\u200b\ufeff e\u0301"


def _parallel(n: int) -> list[Body]:
    calls = [call(random.Random(n), i) for i in range(n)]
    results = [{"role": "tool", "tool_call_id": c["id"], "content": f"r{c['id']}"} for c in calls]
    return [USER, {"role": "assistant", "content": None, "tool_calls": calls}, *results]


def new_shapes() -> list[tuple[str, Body]]:
    """One body per shape the note names (and its neighbours)."""
    out: list[tuple[str, Body]] = []
    for choice in (None, "auto", "none", "required"):
        body: Body = {"messages": [USER], "tools": []}
        if choice is not None:
            body["tool_choice"] = choice
        out.append((f"tools_empty_choice_{choice}", body))
    for effort in EFFORTS:
        out.append((f"effort_{effort}", {"messages": [USER], "reasoning_effort": effort}))
    for key in ("reasoning", "reasoning_content"):
        said = {"role": "assistant", "content": "A", key: "I think ü."}
        out.append((f"history_{key}", {"messages": [USER, said, USER]}))
        calls = {**said, "content": None, "tool_calls": [call(random.Random(3), 0)]}
        result = {"role": "tool", "tool_call_id": "call_0", "content": "ok"}
        out.append((f"history_{key}_calls", {"messages": [USER, calls, result], "tools": TOOLS}))
    for n in (2, 3, 5):
        out.append((f"parallel_calls_{n}", {"messages": _parallel(n), "tools": TOOLS[:3]}))
    out += [
        ("image_only", {"messages": [{"role": "user", "content": [IMAGE]}]}),
        ("image_and_text", {"messages": [{"role": "user", "content": [IMAGE, _t("what?")]}]}),
        ("non_ascii", {"messages": [{"role": "system", "content": NON_ASCII}, _u(NON_ASCII)]}),
        ("non_ascii_tools", {"messages": [_u(NON_ASCII)], "tools": [_tool(NON_ASCII)]}),
        ("system_developer", {"messages": [_sys("S"), _dev("D"), USER, _dev("late")]}),
        ("developer_first", {"messages": [_dev("D"), USER]}),
        ("system_late", {"messages": [USER, _sys("late")], "tools": TOOLS[:1]}),
        ("empty_messages", {"messages": []}),
        ("messages_missing", {"tools": TOOLS[:1]}),
        ("bad_role", {"messages": [{"role": "wizard", "content": "x"}]}),
        ("tool_choice_named", _named()),
        ("tool_choice_unknown_name", {**_named(), "tools": TOOLS[2:3]}),
        ("tools_not_list", {"messages": [USER], "tools": "x"}),
    ]
    long = [_u("one two three four five six seven eight nine ten " * 3)]
    for cap in (None, 64):  # 0.33 keeps one token fewer when no max tokens are given
        extra = {} if cap is None else {"max_tokens": cap}
        body = {"messages": long, "truncate_prompt_tokens": 12, **extra}
        out.append((f"truncated_max_tokens_{cap}", body))
    return out


def _t(text: str) -> Body:
    return {"type": "text", "text": text}


def _u(text: str) -> Body:
    return {"role": "user", "content": text}


def _sys(text: str) -> Body:
    return {"role": "system", "content": text}


def _dev(text: str) -> Body:
    return {"role": "developer", "content": [_t(text)]}


def _tool(description: str) -> Body:
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "ü"}}}
    fn = {"name": "search", "description": description, "parameters": schema}
    return {"type": "function", "function": fn}


def _named() -> Body:
    choice = {"type": "function", "function": {"name": "read_file"}}
    return {"messages": [USER], "tools": TOOLS[:1], "tool_choice": choice}


def mixed_body(seed: int) -> Body:
    """An e2e-style seeded conversation with this module's shapes mixed in."""
    rng = random.Random(10_000 + seed)
    body = random_body(10_000 + seed)
    messages: list[Body] = body["messages"]
    if rng.random() < 0.3:
        body["tools"], body["tool_choice"] = [], rng.choice(["auto", "none", "required"])
    if rng.random() < 0.4:
        body["reasoning_effort"] = rng.choice(EFFORTS[:6])
    for m in messages:
        if m["role"] == "assistant" and rng.random() < 0.5:
            m["reasoning"] = rng.choice(["plan ü", "", "1\n2"])
        if m["role"] == "user" and isinstance(m["content"], str) and rng.random() < 0.2:
            m["content"] += NON_ASCII
    if rng.random() < 0.3:
        messages.insert(0, _dev("Dev note 日本"))
    return body


def chat_corpus() -> list[tuple[str, Body]]:
    """Every chat body, named."""
    cases = [(f"e2e_{n}", b) for n, b in fixed_cases()]
    cases += [(f"e2e_random_{s}", random_body(s)) for s in range(SEEDED)]
    cases += new_shapes()
    cases += [(f"mixed_{s}", mixed_body(s)) for s in range(NEW_SEEDED)]
    return cases
