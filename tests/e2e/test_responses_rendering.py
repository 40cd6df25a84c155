"""The gateway's Responses → chat stage against the real vLLM: same prompt ids, same output.

For each Responses body (hand-written ones per rule, then seeded random Codex-shaped ones with
instructions, developer and user items, reasoning items, assistant text, function calls and
their outputs, function tools, reasoning effort and template kwargs), the ids
``tok.encode(render(prepare_responses(body)), add_special_tokens=True)`` must equal:

- the prompt ids and text vLLM's ``/v1/responses`` itself rendered, which it returns with
  ``enable_response_messages`` (``input_messages[0]`` = the engine prompt's text and ids), and
  the ``usage.input_tokens`` it reports;
- and sent in ``kv_transfer_params.prompt_token_ids``, the same usage and the same greedy
  output, top-5 logprobs included. vLLM returns an empty prompt text when it took forwarded
  ids, which shows it did not render the body itself.

Bodies the stage passes through are not sent; the counts are printed at the end.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ttftscope.gateway.apis.responses.vllm_responses import ADD_SPECIAL_TOKENS, prepare_responses
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

pytestmark = pytest.mark.e2e

RANDOM_CASES = 20
RESULTS: Counter[str] = Counter()
CLOCK: dict[str, float] = {}
# Small and greedy; logprobs depend on every prompt id (the random-weight model mostly says
# newlines, so its text alone would say little).
GREEDY = {
    "max_output_tokens": 2,
    "temperature": 0,
    "top_logprobs": 5,
    "stream": False,
    "enable_response_messages": True,
}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "shell",
        "description": "Run a command in the workspace.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"cmd": {"type": "array", "items": {"type": "string"}}},
            "required": ["cmd"],
            "additionalProperties": False,
        },
    },
    {"type": "function", "name": "read_file", "strict": True, "parameters": {"type": "object"}},
    {"type": "function", "name": "update_plan", "description": "Ü日本 plan."},
    {"type": "function", "name": "noop", "defer_loading": False, "description": None},
]
ARGUMENTS = ['{"cmd": ["pytest", "-q"]}', '{"path": "ü/日本.py"}', "", "{}", "{bad", "[1]", "7"]
TEXTS = [
    "Fix the failing test in tests/test_io.py.",
    "line one\nline two\n\n  indented",
    "unicode: café 日本語 🙂",
    "looks special: <tool_call> and <|im_end|> in user text",
    "",
]
OUTPUTS = ["3 passed, 1 failed", "", "Exit code: 0\nWall time: 0.2 s\nOutput:\nok"]


def text_parts(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "input_text", "text": t} for t in texts]


def parts(rng: random.Random, text: str) -> list[dict[str, Any]]:
    return text_parts(text, *[rng.choice(TEXTS) for _ in range(rng.randint(0, 2))])


def message(rng: random.Random, role: str, text: str) -> dict[str, Any]:
    if rng.random() < 0.3:
        return {"role": role, "content": text}
    return {"type": "message", "role": role, "content": parts(rng, text)}


def reasoning(rng: random.Random) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "summary": []}
    if rng.random() < 0.7:
        item["summary"] = [{"type": "summary_text", "text": rng.choice(TEXTS)}]
    if rng.random() < 0.4:
        item["content"] = [{"type": "reasoning_text", "text": "step 1\nstep 2"}]
    if rng.random() < 0.3:
        item["encrypted_content"] = None
    return item


def agent_step(rng: random.Random, i: int) -> list[dict[str, Any]]:
    """One Codex step: reasoning, text, calls and their outputs, in the order Codex keeps."""
    step: list[dict[str, Any]] = []
    if rng.random() < 0.5:
        step.append(reasoning(rng))
    if rng.random() < 0.4:
        said = rng.choice(["Let me look.", "", "Running the tests now."])
        step.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": said}],
            }
        )
    calls = [
        {
            "type": "function_call",
            "call_id": f"call_{i}_{k}",
            "name": rng.choice(["shell", "read_file"]),
            "arguments": rng.choice(ARGUMENTS),
        }
        for k in range(rng.choice([0, 1, 1, 2]))
    ]
    step += calls
    for c in calls:
        out: Any = rng.choice(OUTPUTS)
        if rng.random() < 0.2:
            out = text_parts(out, "more")
        step.append({"type": "function_call_output", "call_id": c["call_id"], "output": out})
    return step


def random_body(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    body: dict[str, Any] = {"store": False}
    if rng.random() < 0.7:
        body["instructions"] = rng.choice(["You are Codex, a coding agent.", "Be terse.", ""])
    if rng.random() < 0.15:
        body["input"] = rng.choice(TEXTS)
    else:
        items = (
            [message(rng, "developer", "Sandbox: workspace-write.")] if rng.random() < 0.5 else []
        )
        items.append(message(rng, "user", rng.choice(TEXTS)))
        for i in range(rng.randint(0, 4)):
            items += agent_step(rng, i) if rng.random() < 0.7 else [message(rng, "user", "Go on.")]
        body["input"] = items
    if rng.random() < 0.75:
        body["tools"] = rng.sample(TOOLS, rng.randint(1, len(TOOLS)))
        body["tool_choice"] = rng.choice(["auto", "auto", "none"])
        body["parallel_tool_calls"] = rng.random() < 0.5
    if rng.random() < 0.4:
        body["reasoning"] = {"effort": rng.choice(["none", "low", "high"]), "summary": "auto"}
    if rng.random() < 0.2:
        body["chat_template_kwargs"] = rng.choice([{"enable_thinking": True}, {"unused": 1}])
    return body


USER = {"type": "message", "role": "user", "content": text_parts("hi")}
DEV = {"type": "message", "role": "developer", "content": text_parts("D")}
CALL = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd": ["ls"]}'}
OUT = {"type": "function_call_output", "call_id": "c1", "output": "a.py"}
SAID = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "first"}, {"type": "output_text", "text": "x"}],
}
THINK = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "S"}]}
BOTH = {**THINK, "content": [{"type": "reasoning_text", "text": "C"}]}
IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,AA=="}
CODEX = {
    "instructions": "I",
    "input": [DEV, USER, THINK, CALL, OUT, SAID, USER],
    "tools": TOOLS[:1],
    "reasoning": {"effort": "medium"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "s",
}
NO_THINKING = {"reasoning": {"effort": "none"}, "chat_template_kwargs": {"enable_thinking": True}}
# One per rule; "pass_" ones must pass through (and are not sent).
FIXED: list[tuple[str, dict[str, Any]]] = [
    ("plain_text", {"input": "hi"}),
    ("instructions", {"input": "hi", "instructions": "Be brief."}),
    ("developer_merged", {"input": [DEV, USER], "instructions": "I"}),
    ("codex_turn", CODEX),
    ("reasoning_merges_backwards", {"input": [USER, SAID, BOTH, CALL, CALL, OUT]}),
    (
        "output_parts",
        {"input": [CALL, {**OUT, "output": text_parts("a", "", "b")}], "tools": TOOLS},
    ),
    ("tool_choice_none", {"input": [USER], "tools": TOOLS, "tool_choice": "none"}),
    ("tool_choice_required", {"input": [USER], "tools": TOOLS, "tool_choice": "required"}),
    (
        "tool_choice_named",
        {"input": [USER], "tools": TOOLS, "tool_choice": {"type": "function", "name": "read_file"}},
    ),
    ("effort_none", {"input": "hi", "reasoning": {"effort": "none"}}),
    ("kwargs_over_effort", {"input": "hi", **NO_THINKING}),
    ("no_call_id", {"input": [USER, {"type": "function_call_output", "output": "x"}]}),
    ("assistant_text_item", {"input": [USER, {"role": "assistant", "content": "A"}, CALL]}),
    ("system_items", {"instructions": "I", "input": [{"role": "system", "content": "S"}, USER]}),
    ("pass_encrypted", {"input": [USER, {**THINK, "encrypted_content": "gAAAAB"}]}),
    ("pass_image", {"input": [{"type": "message", "role": "user", "content": [IMAGE]}]}),
    ("pass_stateful", {"input": "hi", "previous_response_id": "resp_1"}),
]


NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools for sub-agents.",
    "tools": [
        {"type": "function", "name": "spawn", "strict": False, "parameters": {"type": "object"}},
        {"type": "function", "name": "close", "description": "Close one."},
    ],
}
FIXED.append(
    (
        "namespace_flattened_web_search_dropped",
        {"input": [USER], "tools": [TOOLS[0], NAMESPACE, {"type": "web_search"}]},
    )
)
# what Codex 0.169.0 sent in a real session (tests/e2e/test_agents_standin.py records it):
# developer and environment messages, exec_command and friends, a namespace, web_search
RECORDED = Path(__file__).resolve().parents[1] / "data" / "agents" / "codex_bodies.jsonl"
FIXED += [
    (f"codex_recorded_{i}", json.loads(line))
    for i, line in enumerate(RECORDED.read_text().splitlines())
]

CASES = FIXED + [(f"random_{s}", random_body(s)) for s in range(RANDOM_CASES)]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return load_tokenizer(model_dir())


@pytest.fixture(scope="module")
def client(vllm: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=vllm.root_url, timeout=120) as c:
        probe = {"model": vllm.model, "input": "hi", "max_output_tokens": 1, "tools": TOOLS[:1]}
        r = c.post("/v1/responses", json=probe)
        if r.status_code != 200:
            pytest.fail(f"the shared vLLM does not serve /v1/responses: {r.text[:300]}")
        CLOCK.setdefault("start", time.monotonic())
        yield c


def respond(client: httpx.Client, model: str, body: dict[str, Any], **extra: Any) -> Any:
    sent = {**copy.deepcopy(body), "model": model, **GREEDY, **extra}
    sent["include"] = [*body.get("include", []), "message.output_text.logprobs"]
    r = client.post("/v1/responses", json=sent)
    assert r.status_code == 200, r.text[:500]
    return r.json()


def without_ids(value: Any) -> Any:
    """Output items carry fresh random ids (msg_…, fc_…, call ids) in every response.

    Logprobs are kept to 3 decimals: a prompt longer than one prefill chunk (8,192 tokens
    here) is computed in two chunks the first time and mostly from the prefix cache the
    second, which moves them by ~1e-5.
    """
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in ("id", "call_id")}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    if isinstance(value, float):
        return round(value, 3)
    return value


@pytest.mark.parametrize(("name", "body"), CASES, ids=[n for n, _ in CASES])
def test_responses_rendering_matches_vllm(
    name: str, body: dict[str, Any], tok: Tokenizer, client: httpx.Client, vllm: LocalServer
) -> None:
    source = tok.chat_template or ""
    try:
        inputs = prepare_responses(body, source)
    except PassThrough as exc:
        RESULTS[f"passed through ({exc.reason})"] += 1
        assert name.startswith("pass_"), f"{name} passed through: {exc}"
        return
    text = ChatRenderer(tok, source).render(
        inputs.messages, tools=inputs.tools, **inputs.template_kwargs
    )
    ids = tok.encode(text, add_special_tokens=ADD_SPECIAL_TOKENS)
    plain = respond(client, vllm.model, body)
    assert plain["input_messages"][0]["message"] == text
    assert plain["input_messages"][0]["tokens"] == ids
    assert plain["usage"]["input_tokens"] == len(ids)
    RESULTS["prompt ids and text"] += 1
    reuse = {"prompt_token_ids": ids}
    forwarded = respond(client, vllm.model, body, kv_transfer_params=reuse)
    assert forwarded["input_messages"][0] == {
        "message": "",
        "tokens": ids,
        "type": "raw_message_tokens",
    }
    for key in ("input_tokens", "output_tokens"):  # cached_tokens differ: the cache is warm
        assert forwarded["usage"][key] == plain["usage"][key], key
    assert without_ids(forwarded["output"]) == without_ids(plain["output"])
    assert forwarded["status"] == plain["status"]
    RESULTS["kv_transfer_params output"] += 1


def test_summary(tell: Callable[[str], None]) -> None:
    seconds = time.monotonic() - CLOCK.get("start", time.monotonic())
    tell(
        f"vLLM /v1/responses rendering: {RESULTS['prompt ids and text']}/{len(CASES)} bodies "
        f"matched ({RANDOM_CASES} random): {json.dumps(dict(sorted(RESULTS.items())))}; "
        f"{seconds:.0f} s of requests"
    )
    expected_passes = sum(name.startswith("pass_") for name, _ in CASES)
    assert RESULTS["kv_transfer_params output"] == len(CASES) - expected_passes
