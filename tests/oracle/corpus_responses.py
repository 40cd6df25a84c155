"""Responses bodies for the oracle: the e2e tier's (Codex's recorded ones among them), and new
shapes: assistant items without ``type``, empty assistant content, reasoning items of each
form, ``tools: []``, every reasoning effort, images and files, system and developer items,
item ids and statuses, non-ASCII text; then more seeded Codex-shaped conversations.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.test_responses_rendering import CALL, DEV, FIXED, OUT, TOOLS, USER, random_body

Body = dict[str, Any]
SEEDED = 80
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "huge")
NON_ASCII = "Ünïcödé 日本語 한국어 العربية 🙂 e\u0301"


def _said(content: Any, **extra: Any) -> Body:
    return {"role": "assistant", "content": content, **extra}


def _out(text: str) -> list[Body]:
    return [{"type": "output_text", "text": text, "annotations": []}]


def assistant_shapes() -> list[tuple[str, Body]]:
    typed = {"type": "message"}
    return [
        ("assistant_untyped_string", {"input": [USER, _said("A"), USER]}),
        ("assistant_untyped_parts", {"input": [USER, _said(_out("A")), USER]}),
        ("assistant_typed_empty_list", {"input": [USER, _said([], **typed), USER]}),
        ("assistant_untyped_empty_list", {"input": [USER, _said([]), USER]}),
        ("assistant_empty_string", {"input": [USER, _said(""), USER]}),
        ("assistant_empty_then_call", {"input": [USER, _said([], **typed), CALL, OUT]}),
        ("assistant_with_id_status", {"input": [USER, _said(_out("A"), **_done()), USER]}),
        ("assistant_refusal", {"input": [USER, _said([{"type": "refusal", "refusal": "no"}])]}),
        ("assistant_last", {"input": [USER, _said(_out("Partial"), **typed)]}),
    ]


def _done() -> Body:
    return {"type": "message", "id": "msg_1", "status": "completed"}


def reasoning_shapes() -> list[tuple[str, Body]]:
    summary = [{"type": "summary_text", "text": "S ü"}]
    content = [{"type": "reasoning_text", "text": "C 日本"}]
    items: list[tuple[str, Body]] = [
        ("summary", {"type": "reasoning", "summary": summary}),
        ("content", {"type": "reasoning", "summary": [], "content": content}),
        ("empty", {"type": "reasoning", "summary": []}),
        ("with_id", {"type": "reasoning", "id": "rs_1", "summary": summary}),
        ("encrypted_null", {"type": "reasoning", "summary": summary, "encrypted_content": None}),
        ("no_summary_key", {"type": "reasoning", "content": content}),
    ]
    return [
        (f"reasoning_{name}", {"input": [USER, item, CALL, OUT], "tools": TOOLS[:1]})
        for name, item in items
    ]


def field_shapes() -> list[tuple[str, Body]]:
    out: list[tuple[str, Body]] = []
    for choice in (None, "auto", "none", "required"):
        body: Body = {"input": [USER], "tools": []}
        if choice is not None:
            body["tool_choice"] = choice
        out.append((f"tools_empty_choice_{choice}", body))
    for effort in EFFORTS:
        out.append((f"effort_{effort}", {"input": "hi", "reasoning": {"effort": effort}}))
    image = {"type": "input_image", "image_url": "data:image/png;base64,AA==", "detail": "auto"}
    file = {"type": "input_file", "file_data": "data:text/plain;base64,QQ==", "filename": "a"}
    text = {"type": "input_text", "text": "what?"}
    system = {"role": "system", "content": "S"}
    out += [
        ("image_with_text", {"input": [{"role": "user", "content": [text, image]}]}),
        ("input_file", {"input": [{"role": "user", "content": [text, file]}]}),
        ("system_developer_instructions", {"instructions": "I", "input": [system, DEV, USER]}),
        ("developer_late", {"input": [USER, CALL, OUT, DEV], "tools": TOOLS[:1]}),
        ("non_ascii", {"instructions": NON_ASCII, "input": NON_ASCII}),
        ("non_ascii_call", {"input": [USER, {**CALL, "arguments": '{"cmd": ["ü日本"]}'}, OUT]}),
        ("parallel_calls", {"input": [USER, *_parallel(3)], "tools": TOOLS[:2]}),
        ("call_output_status", {"input": [USER, CALL, {**OUT, "status": "completed"}]}),
        ("item_reference", {"input": [USER, {"type": "item_reference", "id": "msg_0"}]}),
        ("empty_input", {"input": []}),
        ("no_input", {"instructions": "only"}),
        ("input_not_list", {"input": 3}),
        ("parallel_false", {"input": [USER], "tools": TOOLS, "parallel_tool_calls": False}),
    ]
    return out


def _parallel(n: int) -> list[Body]:
    calls = [{**CALL, "call_id": f"c{i}", "arguments": f'{{"cmd": ["{i}"]}}'} for i in range(n)]
    return calls + [{**OUT, "call_id": f"c{i}", "output": f"out {i}"} for i in range(n)]


def responses_corpus() -> list[tuple[str, Body]]:
    """Every Responses body, named."""
    cases = [(f"e2e_{name}", body) for name, body in FIXED]
    cases += assistant_shapes() + reasoning_shapes() + field_shapes()
    cases += [(f"random_{s}", random_body(s)) for s in range(SEEDED)]
    return cases
