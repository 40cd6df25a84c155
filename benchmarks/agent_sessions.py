"""Whole agent sessions through the gateway: how many turns go as ids, what each turn encodes.

Replays the recorded Claude Code (``/v1/messages``) and Codex (``/v1/responses``) sessions in
``tests/data/agents/`` turn by turn, then goes on the way those agents go on: Claude Code's
ToolSearch (a ``tool_result`` of ``tool_reference`` blocks), Codex's freeform ``apply_patch``
(a ``custom`` tool, ``custom_tool_call`` / ``custom_tool_call_output`` items), a compaction
(the history replaced by a summary), and a second session under a new session id that starts
with the same system prompt and tools. Each turn goes through the gateway (in its own
process) and, for comparison, straight to the server as text.

Per agent it prints one JSON line: the share of turns that went as ids, the tokens encoded
per turn (the first turn of a new session apart), and the median TTFT through the gateway
against direct text (who goes first alternates turn by turn, and each median is over the
turns that variant went first: the second of a pair finds the prompt in the prefix cache).
Per-turn figures come from the gateway's ``/metrics`` before and after each turn (turns are
sent one at a time).

    python benchmarks/agent_sessions.py                 # starts the local vLLM
    python benchmarks/agent_sessions.py --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_ab import gateway_process

from ttftscope.localserver.process import running_server
from ttftscope.localserver.serving import TOOL_ARGS

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "agents"
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files. This is a FREEFORM tool.",
    "format": {"type": "text"},
}
PATCH = "*** Begin Patch\n*** Update File: calc.py\n@@\n-    return a - b\n+    return a + b\n"
FILE = "".join(f"{i}\tdef f{i}(x):\n\treturn x * {i}  # ü\n" for i in range(1, 120))
SUMMARY = "This session is being continued from a previous conversation. Summary: {}"


@dataclass
class Session:
    """One agent session: its API, session header and the bodies of its turns in order."""

    agent: str
    path: str
    headers: dict[str, str]
    turns: list[dict[str, Any]] = field(default_factory=list)


def _bodies(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def claude_sessions() -> list[Session]:
    """The recorded session, then ToolSearch, a read, a compaction; a second session."""
    recorded = _bodies("claude_code_bodies.jsonl")
    first = Session("claude-code", "/messages", {"x-claude-code-session-id": "cc-1"})
    first.turns = [{**b, "max_tokens": 8} for b in recorded]
    last = copy.deepcopy(first.turns[-1])
    msgs = last["messages"]
    search = {"query": "select:NotebookEdit"}
    refs = [{"type": "tool_reference", "tool_name": "NotebookEdit"}]
    for i, (name, args, result) in enumerate(
        [
            ("ToolSearch", search, [*refs, {"type": "text", "text": "1 tool found"}]),
            ("Read", {"file_path": "/w/calc.py"}, FILE),
            ("Bash", {"command": "python3 calc.py"}, "ok"),
        ]
    ):
        call = {"type": "tool_use", "id": f"toolu_more_{i}", "name": name, "input": args}
        msgs = [*msgs, {"role": "assistant", "content": [call]}]
        done = {"type": "tool_result", "tool_use_id": call["id"], "content": result}
        msgs = [*msgs, {"role": "user", "content": [done]}]
        first.turns.append({**last, "messages": msgs})
    compacted = [{"role": "user", "content": SUMMARY.format("fixed calc.py; tests pass.")}]
    first.turns.append({**last, "messages": compacted})
    first.turns.append({**last, "messages": [*compacted, *msgs[-2:]]})
    second = Session("claude-code", "/messages", {"x-claude-code-session-id": "cc-2"})
    opening = copy.deepcopy(recorded[0])
    opening["messages"][-1]["content"][-1]["text"] = "Add a docstring to every function."
    second.turns = [{**opening, "max_tokens": 8}]
    return [first, second]


def codex_sessions() -> list[Session]:
    """The recorded session with apply_patch offered, then freeform edits, a compaction;
    a second session."""
    recorded = _bodies("codex_bodies.jsonl")
    first = Session("codex", "/responses", {"session-id": "cx-1"})
    first.turns = [_codex(b) for b in recorded]
    last = first.turns[-1]
    items = list(last["input"])
    for i in range(2):
        call = {"type": "custom_tool_call", "call_id": f"call_p{i}", "name": "apply_patch"}
        items += [{**call, "input": PATCH + f"+# pass {i}\n*** End Patch"}]
        items += [{"type": "custom_tool_call_output", "call_id": f"call_p{i}", "output": "Done!"}]
        first.turns.append({**last, "input": list(items)})
    summary = {"type": "message", "role": "user", "content": SUMMARY.format("calc.py fixed.")}
    first.turns.append({**last, "input": [*items[:2], summary]})
    second = Session("codex", "/responses", {"session-id": "cx-2"})
    opening = _codex(recorded[0])
    opening["prompt_cache_key"] = "cx-2"
    opening["input"] = [*opening["input"][:-1], {**opening["input"][-1], "content": "Add tests."}]
    second.turns = [opening]
    return [first, second]


def _codex(body: dict[str, Any]) -> dict[str, Any]:
    """A recorded Codex body offering freeform apply_patch (as to models that take it), one
    short answer, nothing stored."""
    out = {**body, "tools": [*body["tools"], APPLY_PATCH], "max_output_tokens": 8}
    out.pop("include", None)  # encrypted reasoning: vLLM has none to give
    return out


def _metrics(url: str) -> dict[str, float]:
    """The gateway's counters this benchmark reads, summed over their labels."""
    text = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=10).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"ttftscope_gateway_(\w+?)(?:_total)?(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if not m or line.startswith("#"):
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "requests":
            mode = re.search(r'mode="(\w+)"', labels)
            name = f"requests_{mode.group(1) if mode else '?'}"
        if name == "passthrough":
            reason = re.search(r'reason="(\w+)"', labels)
            name = f"passthrough_{reason.group(1) if reason else '?'}"
        out[name] = out.get(name, 0.0) + value
    return out


def _ttft_ms(
    client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]
) -> float:
    """Milliseconds to the first streamed delta of one request (read to the end)."""
    t0 = time.perf_counter()
    first: float | None = None
    with client.stream("POST", url, json={**body, "stream": True}, headers=headers) as resp:
        if resp.status_code != 200:
            resp.read()
            raise SystemExit(f"{url}: HTTP {resp.status_code}: {resp.text[:300]}")
        for line in resp.iter_lines():
            if first is None and "delta" in line:
                first = time.perf_counter()
    return ((first or time.perf_counter()) - t0) * 1000.0


def _turn(
    client: httpx.Client,
    gateway: str,
    direct: str,
    session: Session,
    body: dict[str, Any],
    gateway_first: bool,
) -> dict[str, Any]:
    """One turn both ways; who goes first alternates (the second finds the whole prompt in
    vLLM's prefix cache, so only the first of each pair is a fair TTFT)."""
    text = 0.0 if gateway_first else _ttft_ms(client, direct + session.path, body, {})
    before = _metrics(gateway)
    via = _ttft_ms(client, gateway + session.path, body, session.headers)
    after = _metrics(gateway)
    if gateway_first:
        text = _ttft_ms(client, direct + session.path, body, {})

    def d(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    reasons = sorted(k[12:] for k in after if k.startswith("passthrough_") and d(k) > 0)
    return {
        "ids": d("requests_ids") >= 1,
        "prompt_tokens": int(d("prompt_tokens")),
        "encoded_tokens": int(d("prompt_tokens") - d("tokens_reused")),
        "gateway_ttft_ms": round(via, 1),
        "direct_text_ttft_ms": round(text, 1),
        "first": "gateway" if gateway_first else "direct",
        "passthrough": reasons,
        "verify_checks": int(d("verify_checks")),
        "verify_mismatches": int(d("verify_mismatches")),
    }


def replay(gateway: str, direct: str, sessions: list[Session]) -> dict[str, Any]:
    """Every turn of every session, in order; the agent's summary line."""
    rows: list[dict[str, Any]] = []
    with httpx.Client(timeout=600) as client:
        for n, session in enumerate(sessions):
            for i, body in enumerate(session.turns):
                row = _turn(client, gateway, direct, session, body, len(rows) % 2 == 0)
                row |= {"session": n + 1, "turn": i + 1}
                rows.append(row)
                print(json.dumps({"agent": session.agent, **row}), file=sys.stderr)
    return _summary(sessions[0].agent, rows)


def _summary(agent: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    later = [r for r in rows if r["turn"] > 1 and r["ids"]]
    opening = [r for r in rows if r["turn"] == 1 and r["session"] > 1]
    return {
        "agent": agent,
        "turns": len(rows),
        "ids_share": round(sum(r["ids"] for r in rows) / len(rows), 3),
        "text_turns": [(r["session"], r["turn"], r["passthrough"]) for r in rows if not r["ids"]],
        "verify_checks": sum(r["verify_checks"] for r in rows),
        "verify_mismatches": sum(r["verify_mismatches"] for r in rows),
        "encoded_tokens_per_turn_median": statistics.median(r["encoded_tokens"] for r in later)
        if later
        else None,
        "new_session_first_turn_encoded_share": [
            round(r["encoded_tokens"] / max(r["prompt_tokens"], 1), 3) for r in opening
        ],
        # each over the turns it went first (the other then found the prompt cached)
        "gateway_ttft_ms_median": _median_first(rows, "gateway"),
        "direct_text_ttft_ms_median": _median_first(rows, "direct"),
    }


def _median_first(rows: list[dict[str, Any]], who: str) -> float | None:
    key = "gateway_ttft_ms" if who == "gateway" else "direct_text_ttft_ms"
    values = [r[key] for r in rows if r["first"] == who]
    return statistics.median(values) if values else None


@contextlib.contextmanager
def _upstream(base_url: str | None) -> Iterator[str]:
    if base_url:
        yield base_url.rstrip("/")
        return
    with running_server(extra_args=TOOL_ARGS) as srv:
        yield f"http://127.0.0.1:{srv.port}/v1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--base-url", help="a vLLM server with tool calling (default: the local one)")
    args = ap.parse_args()
    with (
        _upstream(args.base_url) as direct,
        TemporaryDirectory() as tmp,
        gateway_process(direct, "chat-ids", Path(tmp)) as gateway,
    ):
        for sessions in (claude_sessions(), codex_sessions()):
            print(json.dumps(replay(gateway, direct, sessions)))


if __name__ == "__main__":
    main()
