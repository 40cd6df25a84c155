"""Anthropic ``/v1/messages`` bodies for the oracle: Claude Code's recorded ones, and new shapes.

Each thinking kind (absent, enabled, adaptive, disabled, between_tools) and effort; tool_use
and tool_result (string, blocks, errors, empty, ``tool_reference`` with and without text),
parallel calls, thinking and redacted thinking in history, system strings and blocks with the
billing header, images, tool_choice kinds and non-ASCII text; then seeded conversations.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

Body = dict[str, Any]
RECORDED = Path(__file__).resolve().parents[1] / "data" / "agents" / "claude_code_bodies.jsonl"
SEEDED = 70
BILLING = "x-anthropic-billing-header: cc_version=2.1.0; cch=00000;"
THINKING: list[Any] = [
    None,
    {"type": "enabled", "budget_tokens": 2048},
    {"type": "adaptive"},
    {"type": "disabled"},
    {"type": "between_tools"},
]
EFFORTS = (None, "low", "medium", "high", "xhigh", "max")
TOOLS: list[Body] = [
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    },
    {"name": "Bash", "input_schema": {"properties": {"command": {"type": "string"}}}},
    {"name": "Grep", "description": "Søk 日本", "input_schema": {}, "cache_control": {}},
]
TEXTS = ["Fix the test.", "line one\nline two", "café 日本語 🙂", "", "<|im_end|> in text"]
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}


def _text(text: str, **extra: Any) -> Body:
    return {"type": "text", "text": text, **extra}


def _use(i: int, name: str = "Read") -> Body:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {"file_path": f"ü{i}"}}


def _result(i: int, content: Any, **extra: Any) -> Body:
    return {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": content, **extra}


def _ref(name: str = "Grep") -> Body:
    return {"type": "tool_reference", "tool_name": name}


def _turn(*blocks: Body, result: Any = "ok") -> list[Body]:
    uses = [b for b in blocks if b["type"] == "tool_use"]
    results = [_result(int(b["id"].split("_")[1]), result) for b in uses]
    return [{"role": "assistant", "content": list(blocks)}, {"role": "user", "content": results}]


def _base(**extra: Any) -> Body:
    return {"max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}], **extra}


def thinking_shapes() -> list[tuple[str, Body]]:
    out = []
    for kind in THINKING:
        for effort in (None, "high"):
            body = _base(tools=TOOLS[:1])
            if kind is not None:
                body["thinking"] = kind
            if effort is not None:
                body["output_config"] = {"effort": effort}
            name = kind["type"] if kind else "absent"
            out.append((f"thinking_{name}_effort_{effort}", body))
    for effort in EFFORTS[1:]:
        out.append((f"effort_{effort}", _base(output_config={"effort": effort})))
    out.append(("effort_unknown", _base(output_config={"effort": "huge"})))
    over = {"type": "enabled", "budget_tokens": 4096}  # vLLM: must be below max_tokens
    out.append(("thinking_budget_not_below_max_tokens", _base(thinking=over)))
    return out


def tool_shapes() -> list[tuple[str, Body]]:
    think = {"type": "thinking", "thinking": "Read it ü.", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "xyz"}
    results: list[tuple[str, Any]] = [
        ("string", "file body"),
        ("blocks", [_text("a"), _text("b")]),
        ("empty", ""),
        ("none", None),
        ("reference_only", [_ref()]),
        ("reference_and_text", [_ref(), _text("Tool loaded.")]),
        ("text_and_reference", [_text("Loaded:"), _ref("Bash")]),
        ("reference_nameless", [{"type": "tool_reference"}]),
        ("image", [IMAGE]),
    ]
    out = []
    for name, content in results:
        msgs = [{"role": "user", "content": "go"}, *_turn(_use(1), result=content)]
        out.append((f"tool_result_{name}", _base(messages=msgs, tools=TOOLS)))
    err = [_result(1, "boom", is_error=True), _text("and then?")]
    first = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [_use(1)]}]
    out.append(("tool_result_error_then_text", _base(messages=[*first, _u(err)], tools=TOOLS)))
    parallel = [{"role": "user", "content": "go"}, *_turn(_use(1), _use(2, "Bash"), _use(3))]
    out.append(("parallel_calls", _base(messages=parallel, tools=TOOLS)))
    history = [_u("go"), *_turn(think, _text("Reading."), _use(1)), _u("next")]
    out.append(("thinking_history", _base(messages=history, tools=TOOLS)))
    out.append(("redacted_history", _base(messages=[_u("go"), *_turn(redacted, _use(1))])))
    for kind in ("auto", "any", "none"):
        out.append((f"tool_choice_{kind}", _base(tools=TOOLS, tool_choice={"type": kind})))
    named = {"type": "tool", "name": "Bash"}
    out.append(("tool_choice_tool", _base(tools=TOOLS, tool_choice=named)))
    out.append(("tools_empty", _base(tools=[])))
    return out


def _u(content: Any) -> Body:
    return {"role": "user", "content": content}


def other_shapes() -> list[tuple[str, Body]]:
    system_blocks = [_text(BILLING), _text("You are Claude Code."), _text("ü", cache_control={})]
    return [
        ("system_string", _base(system="Be brief.")),
        ("system_blocks_billing", _base(system=system_blocks)),
        ("system_empty", _base(system="")),
        ("inline_system", _base(messages=[_u("a"), {"role": "system", "content": "S"}, _u("b")])),
        ("image_user", _base(messages=[_u([IMAGE, _text("what is this?")])])),
        ("non_ascii", _base(system="日本語", messages=[_u("Ünïcödé 한국어 🙂 e\u0301")])),
        ("empty_text_blocks", _base(messages=[_u([_text(""), _text("x"), _text("")])])),
        ("assistant_prefill", _base(messages=[_u("hi"), {"role": "assistant", "content": "Su"}])),
        ("assistant_tool_result", _base(messages=[_u("a"), _asst([_result(1, "r")]), _u("b")])),
        ("no_messages", {"max_tokens": 10, "messages": []}),
        ("bad_role", _base(messages=[{"role": "tool", "content": "x"}])),
        ("tool_without_schema", _base(tools=[{"name": "X"}])),
        ("metadata_and_stream", _base(metadata={"user_id": "u"}, stream=True, temperature=1)),
    ]


def _asst(content: Any) -> Body:
    return {"role": "assistant", "content": content}


def random_body(seed: int) -> Body:
    """A Claude Code-shaped conversation: system blocks, tools, steps of calls and results."""
    rng = random.Random(seed)
    msgs: list[Body] = [_u([_text(rng.choice(TEXTS) or "start")])]
    for i in range(rng.randint(0, 4)):
        blocks: list[Body] = []
        if rng.random() < 0.4:
            blocks.append({"type": "thinking", "thinking": rng.choice(TEXTS), "signature": "s"})
        if rng.random() < 0.5:
            blocks.append(_text(rng.choice(TEXTS)))
        uses = [_use(i * 10 + k, rng.choice(["Read", "Bash"])) for k in range(rng.randint(0, 3))]
        if not blocks and not uses:
            blocks.append(_text("ok"))
        msgs.append(_asst(blocks + uses))
        results = [_result(int(u["id"][6:]), _content(rng)) for u in uses]
        tail = [_text(rng.choice(TEXTS))] if rng.random() < 0.3 or not results else []
        msgs.append(_u(results + tail))
    body = _base(messages=msgs)
    if rng.random() < 0.7:
        body["system"] = [_text(BILLING), _text("You are a coding agent.")]
    if rng.random() < 0.8:
        body["tools"] = rng.sample(TOOLS, rng.randint(1, 3))
    kind = rng.choice(THINKING)
    if kind is not None:
        body["thinking"] = kind
    if rng.random() < 0.3:
        body["output_config"] = {"effort": rng.choice(EFFORTS[1:])}
    return body


def _content(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.5:
        return rng.choice(TEXTS)
    if pick < 0.85:
        return [_text(rng.choice(TEXTS)) for _ in range(rng.randint(1, 2))]
    return [_ref(rng.choice(["Grep", "Bash"]))] + ([_text("loaded")] if pick < 0.95 else [])


def messages_corpus() -> list[tuple[str, Body]]:
    """Every Anthropic body, named."""
    lines = RECORDED.read_text(encoding="utf-8").splitlines()
    cases = [(f"claude_code_recorded_{i}", json.loads(line)) for i, line in enumerate(lines)]
    cases += thinking_shapes() + tool_shapes() + other_shapes()
    cases += [(f"random_{s}", random_body(s)) for s in range(SEEDED)]
    return cases
