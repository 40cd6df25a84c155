"""The coding agents' own APIs: text straight to vLLM vs through the gateway vs ids straight.

Claude Code-shaped conversations on ``/v1/messages`` and Codex-shaped ones on
``/v1/responses``: a ~2.8K-token system prompt (instructions), ~12K tokens of tool
definitions, then tool calls and their results, grown to each context size. Every round
appends one tool call and its result, of a size drawn from the public Claude Code traces
(kv-cache-tester: median append 655 tokens, p90 3,541, capped at the p99 16,439), and the
variants alternate within the round (who goes first rotates) against the same server:

- ``text``: the API body straight to vLLM (vLLM converts, renders and tokenizes);
- ``ids``: the client converts, renders and fully encodes as vLLM would and sends the body
  with ``kv_transfer_params.prompt_token_ids`` straight to vLLM (client time not counted:
  the ceiling of what ids can give);
- ``gateway``: the API body to ``ttftscope gateway`` in its own process.

The round's new result is one text behind a different tag per variant, so each finds the
history cached and its turn new, at the same size. One JSON line per API and size, with
``text_over_gateway``, ``gateway_over_ids`` (and its bootstrap ``_ci95``) and
``requests``; the last line is the largest size of the last API. ``--append-tokens 350``
replaces the traces' appends with short fixed turns (what ``gateway_ab.py`` sends), where
tokenization is a larger share of TTFT than the prefill of the append.

    python benchmarks/agent_api_ab.py --sizes 32000,100000 --apis messages,responses
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_ab import gateway_process, ratio_ci

from ttftscope.agenttext import build_context
from ttftscope.bench.plan.traces import SYSTEM_PROMPT_TOKENS, TRACE_APPENDS
from ttftscope.gateway.apis.messages.vllm_messages import messages_to_chat
from ttftscope.gateway.apis.responses.vllm_responses import prepare_responses
from ttftscope.gateway.pipeline.forward import token_event
from ttftscope.gateway.pipeline.vllm_chat import prepare_chat
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.process import running_server
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

VARIANTS = ("text", "ids", "gateway")
# the public Claude Code traces, as the bench's default workload takes them
SYSTEM_TOKENS, TOOLS_TOKENS, TOOL_COUNT = SYSTEM_PROMPT_TOKENS, 12000, 14
APPEND_MEAN = round(TRACE_APPENDS.median * math.exp(TRACE_APPENDS.sigma**2 / 2))  # ~1,550


def append_tokens(rng: random.Random) -> int:
    """One append's size in tokens, drawn to the traces' median and p90 (p99 cap).

    >>> sorted(append_tokens(random.Random(s)) for s in range(5))[2] > 0
    True
    """
    return TRACE_APPENDS.size(rng.gauss(0.0, 1.0))


class Shape:
    """Text of given token counts, from the probe's agent context (code, logs, diffs)."""

    def __init__(self, tok: Tokenizer) -> None:
        self.count = lambda s: len(tok.encode(s))

    def text(self, tokens: int, seed: int) -> str:
        return build_context(tokens, self.count, seed=seed)

    def tools(self) -> list[dict[str, Any]]:
        """~12K tokens of tool definitions, as Anthropic tools."""
        per = TOOLS_TOKENS // TOOL_COUNT
        return [
            {
                "name": f"tool_{i}",
                "description": self.text(per - 60, seed=900 + i),
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "command": {"type": "string"}},
                    "required": ["path"],
                },
            }
            for i in range(TOOL_COUNT)
        ]


class Conversation:
    """One agent conversation of ``api``, grown to ``tokens`` with tool calls and results."""

    def __init__(
        self, api: str, shape: Shape, tokens: int, seed: int, rounds: int, append: int = 0
    ) -> None:
        self.api, self.shape, self.seed, self.append = api, shape, seed, append
        self.rng = random.Random(seed)
        self.system = f"You are a coding agent. Session {seed}.\n" + shape.text(SYSTEM_TOKENS, seed)
        self.tools = shape.tools()
        self.steps: list[tuple[str, str]] = []  # (call id, result text)
        # the run appends ~rounds * APPEND_MEAN: start below the size by half of that, so
        # the measured requests sit around it
        grown = (rounds + 1) * (append or APPEND_MEAN) // 2
        body_tokens = max(0, tokens - SYSTEM_TOKENS - TOOLS_TOKENS - grown)
        while sum(shape.count(r) for _, r in self.steps) < body_tokens:
            self.steps.append(
                (f"call_{len(self.steps)}", shape.text(3000, seed * 1000 + len(self.steps)))
            )
        self.turn = 0

    def round_texts(self, n: int) -> list[str]:
        """This round's new result for ``n`` variants: one text behind different tags."""
        self.turn += 1
        size = self.append or append_tokens(self.rng)
        text = self.shape.text(size, seed=self.seed * 7919 + self.turn)
        return [f"[{chr(ord('A') + (i + self.turn) % n)}] {text}" for i in range(n)]

    def body(self, model: str, new_result: str) -> dict[str, Any]:
        steps = [*self.steps, (f"call_{len(self.steps)}", new_result)]
        if self.api == "messages":
            return self._messages(model, steps)
        return self._responses(model, steps)

    def advance(self, new_result: str) -> None:
        self.steps.append((f"call_{len(self.steps)}", new_result))

    def _messages(self, model: str, steps: list[tuple[str, str]]) -> dict[str, Any]:
        msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
        for call, result in steps:
            use = {"type": "tool_use", "id": call, "name": "tool_0", "input": {"path": call}}
            msgs.append({"role": "assistant", "content": [use]})
            res = {"type": "tool_result", "tool_use_id": call, "content": result}
            msgs.append({"role": "user", "content": [res]})
        return {
            "model": model,
            "max_tokens": 4,
            "temperature": 0,
            "stream": True,
            "system": [{"type": "text", "text": self.system}],
            "tools": self.tools,
            "messages": msgs,
        }

    def _responses(self, model: str, steps: list[tuple[str, str]]) -> dict[str, Any]:
        items: list[dict[str, Any]] = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Fix the failing test."}],
            }
        ]
        for call, result in steps:
            args = json.dumps({"path": call})
            items.append(
                {"type": "function_call", "call_id": call, "name": "tool_0", "arguments": args}
            )
            items.append({"type": "function_call_output", "call_id": call, "output": result})
        tools = [
            {"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["input_schema"], "strict": False}
            for t in self.tools
        ]  # fmt: skip
        return {
            "model": model,
            "instructions": self.system,
            "tools": tools,
            "input": items,
            "store": False,
            "stream": True,
            "max_output_tokens": 4,
            "temperature": 0,
        }


def client_ids(api: str, body: dict[str, Any], renderer: ChatRenderer, tok: Tokenizer) -> list[int]:
    """The ids vLLM renders for ``body``, computed as the gateway does, in full."""
    if api == "messages":
        inputs = prepare_chat(messages_to_chat(body), renderer.source)
    else:
        inputs = prepare_responses(body, renderer.source)
    prompt = renderer.render(inputs.messages, tools=inputs.tools, **inputs.template_kwargs)
    return tok.encode(prompt, add_special_tokens=api == "responses")


async def ttft_ms(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> float:
    """Time to the first SSE event that carries a token (or the stream's end)."""
    marker = token_event(url)
    assert isinstance(marker, bytes)
    t0 = time.perf_counter()
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            raise SystemExit(f"{url}: HTTP {resp.status_code}: {(await resp.aread())[:300]!r}")
        async for chunk in resp.aiter_bytes():
            if marker in chunk:
                return 1000 * (time.perf_counter() - t0)
    return 1000 * (time.perf_counter() - t0)


async def size_run(
    api: str, urls: dict[str, str], model: str, tok: Tokenizer, tokens: int, rounds: int,
    conversations: int, append: int = 0,
) -> dict[str, Any]:  # fmt: skip
    renderer = ChatRenderer(tok)
    shape = Shape(tok)
    convs = [
        Conversation(api, shape, tokens, seed=tokens + c, rounds=rounds, append=append)
        for c in range(conversations)
    ]
    path = "/messages" if api == "messages" else "/responses"
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    sizes: list[int] = []
    async with httpx.AsyncClient(timeout=900) as client:
        for r in range(rounds + 1):  # round 0 fills the prefix cache and the gateway session
            for c, conv in enumerate(convs):
                texts = dict(zip(VARIANTS, conv.round_texts(len(VARIANTS)), strict=True))
                order = VARIANTS[(r + c) % 3 :] + VARIANTS[: (r + c) % 3]
                ms: dict[str, float] = {}
                for v in order:
                    body = conv.body(model, texts[v])
                    if v == "ids":
                        ids = client_ids(api, body, renderer, tok)
                        body = {**body, "kv_transfer_params": {"prompt_token_ids": ids}}
                        sizes.append(len(ids))
                    base = urls["gateway"] if v == "gateway" else urls["direct"]
                    ms[v] = await ttft_ms(client, base + path, body)
                conv.advance(texts["gateway"])
                if r:
                    for v in VARIANTS:
                        times[v].append(ms[v])
                print(
                    f"  {api} {tokens:,} tokens, round {r}, conversation {c}: "
                    + ", ".join(f"{v} {ms[v]:.0f} ms" for v in VARIANTS),
                    file=sys.stderr,
                )
    med = {v: statistics.median(times[v]) for v in VARIANTS}
    return {
        "api": api,
        "context_tokens": round(statistics.median(sizes)),
        "context_tokens_first_last": [sizes[0], sizes[-1]],
        **{f"{v}_median_ttft_ms": round(med[v], 1) for v in VARIANTS},
        "text_over_gateway": round(med["text"] / med["gateway"], 3),
        "gateway_over_ids": round(med["gateway"] / med["ids"], 3),
        "gateway_over_ids_ci95": ratio_ci(times["gateway"], times["ids"]),
        "text_over_ids": round(med["text"] / med["ids"], 3),
        "requests": sum(len(t) for t in times.values()),
        "conversations": conversations,
        "append_tokens": append or "traces",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="32000,100000", help="context sizes in tokens")
    ap.add_argument("--apis", default="messages,responses")
    ap.add_argument("--rounds", type=int, default=12, help="measured rounds per conversation")
    ap.add_argument("--conversations", type=int, default=2, help="agents taking turns")
    ap.add_argument("--base-url", help="an already running vLLM (default: the local one)")
    ap.add_argument(
        "--append-tokens",
        type=int,
        default=0,
        help="a fixed append per round instead of the traces' draws (e.g. 350: a short turn)",
    )
    args = ap.parse_args()
    tok = load_tokenizer(model_dir())
    with contextlib.ExitStack() as stack:
        if args.base_url:
            base, model = (
                args.base_url,
                httpx.get(args.base_url + "/models").json()["data"][0]["id"],
            )
        else:
            server = stack.enter_context(running_server(wait_s=900))
            base, model = server.base_url, server.model
        tmp = Path(stack.enter_context(TemporaryDirectory()))
        urls = {
            "direct": base,
            "gateway": stack.enter_context(gateway_process(base, "chat-ids", tmp)),
        }
        for api in args.apis.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                result = asyncio.run(
                    size_run(
                        api,
                        urls,
                        model,
                        tok,
                        size,
                        args.rounds,
                        args.conversations,
                        args.append_tokens,
                    )
                )
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
