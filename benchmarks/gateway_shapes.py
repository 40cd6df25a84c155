"""What deriving a request's shape classes costs on the request path (``gateway.shapes``).

Times :func:`~ttftscope.gateway.pipeline.shapes.shape_classes` on agent-like bodies of each API: a
short turn, and a long session (N messages of ~1.4K characters with tool calls, tool results
and a non-ASCII character near the end, so the non-ASCII scan reads every string), beside
``orjson.loads`` of the same body (what every request already pays) for scale. Prints
figures; the last line is one JSON object.

    python benchmarks/gateway_shapes.py --messages 400
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from ttftscope.agenttext import agent_turn
from ttftscope.gateway.pipeline.shapes import NativeApi, shape_classes


def _chat(n: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n // 3):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [
            {"role": "user", "content": agent_turn(i)},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": agent_turn(i + 1)},
        ]
    messages.append({"role": "user", "content": "fertig? é"})
    return {"model": "m", "messages": messages, "tools": [{"type": "function"}]}


def _messages(n: int) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for i in range(n // 2):
        use = {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}}
        res = {"type": "tool_result", "tool_use_id": f"t{i}", "content": agent_turn(i)}
        out += [
            {"role": "assistant", "content": [{"type": "text", "text": agent_turn(i)}, use]},
            {"role": "user", "content": [res]},
        ]
    out.append({"role": "user", "content": "fertig? é"})
    return {"model": "m", "system": "x", "messages": out, "thinking": {"type": "adaptive"}}


def _responses(n: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i in range(n // 2):
        items += [
            {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": agent_turn(i)},
        ]
    items.append({"type": "message", "role": "user", "content": "fertig? é"})
    return {"model": "m", "instructions": "x", "input": items}


def _us(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    out: dict[str, float] = {}
    builders: dict[NativeApi, Callable[[int], dict[str, Any]]] = {
        "chat": _chat,
        "messages": _messages,
        "responses": _responses,
    }
    for api, build in builders.items():
        for n in (4, args.messages):
            body = build(n)
            raw = orjson.dumps(body)
            shapes = _us(lambda b=body, a=api: shape_classes(a, b), args.repeat)  # type: ignore[misc]
            parse = _us(lambda r=raw: orjson.loads(r), args.repeat)  # type: ignore[misc]
            print(
                f"{api:9} {n:5} messages {len(raw) / 1024:8.1f} KB: shape_classes "
                f"{shapes:8.1f} us, orjson.loads {parse:8.1f} us ({shapes / parse:.2f}x)"
            )
            out[f"{api}_{n}_us"] = round(shapes, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
