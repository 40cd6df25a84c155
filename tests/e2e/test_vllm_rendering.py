"""The gateway's chat preprocessing against the real vLLM: same prompt text, same ids, same output.

For each conversation (hand-written ones for each rewrite rule, then seeded random ones with
tools, tool calls, tool results, system/developer messages, parts, reasoning and template
kwargs), ``tok.encode(ChatRenderer(tok, source).render(**prepare_chat(body)))`` must equal:

- the ids and prompt text vLLM's chat endpoint reports for the same body
  (``return_token_ids`` / ``return_prompt_text``), and its ``usage.prompt_tokens``;
- ``/tokenize`` with messages and tools, where ``/tokenize`` rewrites as chat does (it does
  not rename ``reasoning_content`` and has no ``reasoning_effort`` or ``documents``);
- and the ids sent in ``kv_transfer_params.prompt_token_ids`` give the same greedy output,
  token ids and top-5 logprobs as the plain request. The random-weight model answers almost
  any prompt with newlines, so the logprobs (which depend on every prompt token) are the
  strong part of this check.

Conversations the stage passes through are not compared; the counts are printed at the end.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.vllm_chat import prepare_chat
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

pytestmark = pytest.mark.e2e

RANDOM_CASES = 100

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {"type": "function", "function": {"name": "run_tests", "junk": "dropped"}, "extra": 1},
    {"function": {"name": "grep", "parameters": {"type": "object"}, "strict": True}},
    {"type": "function", "function": {"description": "", "name": "noop"}, "defer_loading": False},
]
ARGUMENTS = [
    '{"path": "src/main.py", "limit": 20}',
    '{"pattern": "ü日本", "flags": [1, 2.50, null]}',
    "",
    "{}",
    "{not json",
    "[1, 2]",
    "42",
    "null",
    '"a string"',
    ' {"spaced": true} ',
]
TEXTS = [
    "Fix the failing test in tests/test_io.py.",
    "line one\nline two\n\n  indented",
    "unicode: café 日本語 🙂",
    "looks special: <tool_call> and <|im_end|> in user text",
    "",
    "Run `pytest -q` and report.",
    '{"json": "as text"}',
]
BILLING = "x-anthropic-billing-header: cc_version=1.0.0; cch=4f2a;\n"


def call(rng: random.Random, i: int) -> dict[str, Any]:
    """An assistant tool call: valid, empty, invalid or non-object arguments; extra keys."""
    fn = {
        "name": rng.choice(["read_file", "run_tests", "grep"]),
        "arguments": rng.choice(ARGUMENTS),
    }
    out: dict[str, Any] = {"id": f"call_{i}", "type": "function", "function": fn}
    if rng.random() < 0.2:
        out["index"] = i
    if rng.random() < 0.1:
        fn["extra_field"] = "kept for the template"
    return out


def content(rng: random.Random, text: str) -> str | list[dict[str, Any]]:
    """Plain text or text parts (some empty, some with cache_control, as agents send)."""
    if rng.random() < 0.6:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for _ in range(rng.randint(0, 2)):
        part: dict[str, Any] = {"type": "text", "text": rng.choice(TEXTS)}
        if rng.random() < 0.3:
            part["cache_control"] = {"type": "ephemeral"}
        parts.append(part)
    return parts


def turn(rng: random.Random, i: int) -> list[dict[str, Any]]:
    """One agent step: a user ask, or an assistant turn with tool calls and their results."""
    if rng.random() < 0.4:
        return [{"role": "user", "content": content(rng, rng.choice(TEXTS))}]
    calls = [call(rng, i * 10 + k) for k in range(rng.choice([0, 1, 1, 2, 3]))]
    said = rng.choice([None, None, "", "Let me look.", "Running the tests now."])
    assistant: dict[str, Any] = {"role": "assistant", "content": said}
    if calls or rng.random() < 0.2:
        assistant["tool_calls"] = calls
    if rng.random() < 0.3:
        assistant[rng.choice(["reasoning", "reasoning_content"])] = rng.choice(
            ["The test reads the wrong file.", "", "step 1\nstep 2"]
        )
    results: list[dict[str, Any]] = []
    for c in calls:
        result: dict[str, Any] = {"role": "tool", "tool_call_id": c["id"]}
        result["content"] = content(rng, rng.choice(["ok", "3 passed, 1 failed", "", "E  x"]))
        if rng.random() < 0.2:
            result["name"] = c["function"]["name"]
        results.append(result)
    return [assistant, *results]


def random_body(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.7:
        system = rng.choice(["You are a coding agent.", "Be terse.", ""])
        messages.append(
            {"role": "system", "content": (BILLING if rng.random() < 0.3 else "") + system}
        )
    messages.append({"role": "user", "content": content(rng, rng.choice(TEXTS))})
    for i in range(rng.randint(0, 4)):
        messages += turn(rng, i)
    for _ in range(rng.choice([0, 0, 1, 2])):  # developer/system notes anywhere
        note = {"role": rng.choice(["developer", "system"]), "content": content(rng, "Note.")}
        messages.insert(rng.randint(0, len(messages)), note)
    body: dict[str, Any] = {"messages": messages}
    if rng.random() < 0.75:
        body["tools"] = rng.sample(TOOLS, rng.randint(1, len(TOOLS)))
        if rng.random() < 0.3:
            body["tool_choice"] = rng.choice(["auto", "none"])
    options: list[tuple[str, Any]] = [
        ("reasoning_effort", rng.choice(["none", "low", "high"])),
        ("chat_template_kwargs", {"enable_thinking": rng.choice([True, False, None])}),
        ("chat_template_kwargs", {"unused_by_template": 1}),
        ("documents", [{"title": "README", "text": "Install with pip."}]),
        ("add_generation_prompt", False),
    ]
    for key, value in rng.sample(options, rng.choice([0, 0, 1, 2])):
        body[key] = value
    return body


def fixed_cases() -> list[tuple[str, dict[str, Any]]]:
    user: dict[str, Any] = {"role": "user", "content": "hi"}
    tool_turn = [
        user,
        {"role": "assistant", "content": None, "tool_calls": [call(random.Random(1), 0)]},
        {"role": "tool", "tool_call_id": "call_0", "content": [{"type": "text", "text": "x"}]},
    ]
    odd = [
        {"id": f"c{i}", "type": "function", "function": {"name": "grep", "arguments": a}}
        for i, a in enumerate(["", "{bad", "[1]", "7", "null"])
    ]
    bad_args = {"role": "assistant", "content": "ok", "tool_calls": odd}
    system = {"role": "system", "content": "S"}
    parts = [{"type": "text", "text": t} for t in ("a", "", "b")]
    developer = {"role": "developer", "content": parts[:1]}
    thought = {"role": "assistant", "content": "A", "reasoning_content": "R"}
    return [
        ("plain", {"messages": [user]}),
        ("tools_reserialized", {"messages": [user], "tools": TOOLS}),
        ("tool_call_and_result", {"messages": tool_turn, "tools": TOOLS[:1]}),
        ("odd_arguments", {"messages": [user, bad_args, user], "tools": TOOLS[2:]}),
        ("tool_choice_none", {"messages": tool_turn, "tools": TOOLS, "tool_choice": "none"}),
        ("developer_merged", {"messages": [system, user, developer], "tools": TOOLS[:1]}),
        ("many_systems", {"messages": [system, user, {**system, "content": "b"}]}),
        ("billing_header", {"messages": [{**system, "content": BILLING + "Be brief."}, user]}),
        ("none_and_parts", {"messages": [{"role": "assistant"}, {**user, "content": parts}]}),
        ("reasoning_content", {"messages": [user, thought, user]}),
        ("reasoning_effort_none", {"messages": [user], "reasoning_effort": "none"}),
        (
            "kwargs_over_effort",
            {
                "messages": [user],
                "reasoning_effort": "none",
                "chat_template_kwargs": {"enable_thinking": True},
            },
        ),
        ("documents", {"messages": [user], "documents": [{"title": "T", "text": "body"}]}),
        ("no_generation_prompt", {"messages": [user], "add_generation_prompt": False}),
    ]


CASES = fixed_cases() + [(f"random_{seed}", random_body(seed)) for seed in range(RANDOM_CASES)]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return load_tokenizer(model_dir())


@pytest.fixture(scope="module")
def client(vllm: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=vllm.root_url, timeout=120) as c:
        probe = {
            "model": vllm.model,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 1,
        }
        r = c.post("/v1/chat/completions", json={**probe, "tools": TOOLS[:1]})
        if r.status_code != 200:
            pytest.fail(
                "the shared vLLM does not take tool requests (started without the e2e "
                f"SERVER_ARGS?): {r.status_code} {r.text[:300]}"
            )
        yield c


def chat(client: httpx.Client, model: str, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/chat/completions", json={**copy.deepcopy(body), "model": model, **extra})
    assert r.status_code == 200, r.text[:500]
    answer: dict[str, Any] = r.json()
    return answer


def tokenize_applies(body: dict[str, Any]) -> bool:
    """Whether /tokenize rewrites this body as chat does (see the module docstring)."""
    renamed = any("reasoning_content" in m for m in body["messages"])
    return not renamed and not {"reasoning_effort", "documents"} & body.keys()


@pytest.mark.parametrize(("name", "body"), CASES, ids=[n for n, _ in CASES])
def test_rendering_matches_vllm(
    name: str, body: dict[str, Any], tok: Tokenizer, client: httpx.Client, vllm: LocalServer
) -> None:
    source = tok.chat_template or ""
    try:
        inputs = prepare_chat(body, source)
    except PassThrough as exc:
        assert exc.reason  # passed through as the client wrote it: nothing of ours to compare
        return
    text = ChatRenderer(tok, source).render(
        inputs.messages, tools=inputs.tools, **inputs.template_kwargs
    )
    ids = tok.encode(text)
    first = chat(
        client, vllm.model, body, max_tokens=1, return_token_ids=True, return_prompt_text=True
    )
    assert first["prompt_text"] == text
    assert first["prompt_token_ids"] == ids
    assert first["usage"]["prompt_tokens"] == len(ids)
    greedy = {"max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 5}
    plain = chat(client, vllm.model, body, return_token_ids=True, **greedy)
    reuse = {"prompt_token_ids": ids}
    forwarded = chat(
        client, vllm.model, body, return_token_ids=True, kv_transfer_params=reuse, **greedy
    )
    assert forwarded["prompt_token_ids"] == ids
    assert forwarded["usage"] == plain["usage"]
    for key in ("message", "token_ids", "logprobs", "finish_reason"):
        assert forwarded["choices"][0][key] == plain["choices"][0][key], key
    if tokenize_applies(body):
        keys = ("messages", "tools", "add_generation_prompt", "chat_template_kwargs")
        payload = {k: copy.deepcopy(body[k]) for k in keys if k in body}
        r = client.post("/tokenize", json={"model": vllm.model, **payload})
        assert r.status_code == 200, r.text[:300]
        assert r.json()["tokens"] == ids


@pytest.fixture(scope="module")
def stage_outcomes(tok: Tokenizer) -> Counter[str]:
    """What the gateway's stage does with each case: takes it (then the test above compares it
    with vLLM) or passes it through, and why. Computed here, not collected from the other
    tests, so this test means the same run alone, in any order, or after a failure."""
    counts: Counter[str] = Counter()
    for _, body in CASES:
        try:
            prepare_chat(body, tok.chat_template or "")
        except PassThrough as exc:
            counts[f"passed through ({exc.reason})"] += 1
        else:
            counts["compared with vLLM"] += 1
    return counts


def test_summary(tell: Callable[[str], None], stage_outcomes: Counter[str]) -> None:
    total = len(CASES)
    compared = stage_outcomes["compared with vLLM"]
    tell(
        f"vLLM rendering: {compared}/{total} conversations compared ({RANDOM_CASES} random): "
        f"{json.dumps(dict(sorted(stage_outcomes.items())))}"
    )
    assert compared >= 0.9 * total  # the generator writes requests the stage should take
