"""A scripted stand-in upstream for the real coding agents (Claude Code, Codex CLI), for tests.

It answers the Anthropic Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``)
and the OpenAI Responses API (``POST /v1/responses``), streaming (SSE in each API's own event
format) and not, plus ``GET /v1/models``. Every request that reaches it, on any path, is
recorded (keys redacted) in memory and, if asked, appended to a JSONL file.

A conversation follows a script, one step per request, picked by how many tool results the
request carries (so the stand-in keeps no per-conversation state and side requests, which
carry none, are answered too): read the file, run the check, edit the file, run the check
again, then a final text answer. Tool calls use the agent's own tool names and argument
shapes (Claude Code: ``Read``, ``Bash``, ``Edit``; Codex: ``exec_command`` or ``shell``, and
``apply_patch`` as a tool when offered, else through the shell as Codex's prompt asks).
A request that offers none of the script's tools gets a text answer::

    with AgentStandin(Task(workspace)) as srv:
        srv.root_url        # http://127.0.0.1:PORT (Claude Code's ANTHROPIC_BASE_URL)
        srv.requests        # every request, in order
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ttftscope.threadserver import ThreadServer

__all__ = ["SCRIPT", "AgentStandin", "RecordedRequest", "Task", "ToolCall"]

SCRIPT = ("read", "run", "edit", "run", "answer")
SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"}
)
API_PATHS = frozenset({"/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/v1/models"})


@dataclass(frozen=True)
class Task:
    """The scripted task: fix ``old`` → ``new`` (whole lines) in ``file_name``, run ``check``."""

    workspace: Path
    file_name: str = "calc.py"
    old: str = "    return a - b"
    new: str = "    return a + b"
    check: str = "python3 calc.py"
    answer: str = "Fixed add() in calc.py: it returned a - b; `python3 calc.py` now prints ok."

    @property
    def file_path(self) -> Path:
        return self.workspace / self.file_name

    def patch(self) -> str:
        """The edit in Codex's apply_patch format."""
        return (
            f"*** Begin Patch\n*** Update File: {self.file_name}\n@@\n"
            f"-{self.old}\n+{self.new}\n*** End Patch\n"
        )


@dataclass(frozen=True)
class ToolCall:
    """One call: JSON arguments for function tools, raw text for freeform (custom) tools."""

    name: str
    arguments: dict[str, Any] | str

    @property
    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # keys redacted
    body: Any  # the parsed JSON; the text when it is not JSON; None when empty
    raw: bytes = field(default=b"", repr=False)  # the body's bytes as the agent sent them

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "raw"}


class AgentStandin(ThreadServer):
    """Context manager serving the stand-in on 127.0.0.1; always stopped on exit."""

    def __init__(self, task: Task, *, record_path: Path | None = None) -> None:
        self.task, self.record_path = task, record_path
        self.requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        super().__init__(_asgi_app(self), name="agent stand-in", http="h11")

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def new_id(self, prefix: str) -> str:
        """Ids count up, so two runs of one script send the agent the same bytes."""
        return f"{prefix}_standin_{next(self._ids):04d}"

    def record(self, request: Request, raw: bytes) -> None:
        headers = {
            k: "<redacted>" if k.lower() in SECRET_HEADERS else v
            for k, v in request.headers.items()
        }
        url = request.url
        rec = RecordedRequest(request.method, url.path, url.query, headers, _parse(raw), raw)
        self.requests.append(rec)
        if self.record_path is not None:
            with self.record_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec.to_json()) + "\n")

    def answer(self, method: str, path: str, body: Any) -> Response:
        if method == "GET" and path == "/v1/models":
            return JSONResponse(_models())
        if method != "POST" or path not in API_PATHS or not isinstance(body, dict):
            error = {"type": "not_found_error", "message": f"no route for {method} {path}"}
            return JSONResponse({"type": "error", "error": error}, status_code=404)
        if path == "/v1/messages/count_tokens":
            return JSONResponse({"input_tokens": _tokens(body)})
        if path == "/v1/messages":
            return self._messages(body)
        return self._responses(body)

    # --- Anthropic Messages -------------------------------------------------------------------

    def _messages(self, body: dict[str, Any]) -> Response:
        call = _claude_call(self.task, body)
        blocks: list[dict[str, Any]] = []
        if call is None:
            blocks.append({"type": "text", "text": self.task.answer})
        else:
            blocks.append({"type": "text", "text": f"Next: {call.name}."})
            blocks.append(
                {"type": "tool_use", "id": self.new_id("toolu"), "name": call.name, "input": {}}
            )
        msg = {
            "id": self.new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "standin"),
            "content": blocks,
            "stop_reason": "end_turn" if call is None else "tool_use",
            "stop_sequence": None,
            "usage": _anthropic_usage(body, 0),
        }
        if body.get("stream"):
            return _sse_response(_anthropic_events(msg, call))
        if call is not None:
            blocks[-1]["input"] = call.arguments
        msg["usage"] = _anthropic_usage(body, 12)
        return JSONResponse(msg)

    # --- OpenAI Responses ---------------------------------------------------------------------

    def _responses(self, body: dict[str, Any]) -> Response:
        call = _codex_call(self.task, body)
        if call is None:
            item = _message_item(self.new_id("msg"), self.task.answer)
        else:
            item = _call_item(self.new_id("fc"), self.new_id("call"), call, body)
        response = {
            "id": self.new_id("resp"),
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": body.get("model", "standin"),
            "output": [item],
            "usage": _responses_usage(body),
        }
        if body.get("stream"):
            return _sse_response(_responses_events(response, item))
        return JSONResponse(response)


def _asgi_app(srv: AgentStandin) -> Any:
    # a plain coroutine function: uvicorn would take a bound method for an ASGI2 app
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        raw = await request.body()
        srv.record(request, raw)
        response = srv.answer(request.method, scope["path"], _parse(raw))
        await response(scope, receive, send)

    return app


# --- the script -------------------------------------------------------------------------------


def step_of(tool_results: int) -> str:
    """The script step for a request that carries ``tool_results`` tool results."""
    return SCRIPT[min(tool_results, len(SCRIPT) - 1)]


def anthropic_tool_results(body: dict[str, Any]) -> int:
    return sum(
        1
        for msg in body.get("messages", [])
        if isinstance(msg.get("content"), list)
        for block in msg["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def responses_tool_results(body: dict[str, Any]) -> int:
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    kinds = {"function_call_output", "custom_tool_call_output"}
    return sum(1 for item in items if isinstance(item, dict) and item.get("type") in kinds)


def _claude_call(task: Task, body: dict[str, Any]) -> ToolCall | None:
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    step = step_of(anthropic_tool_results(body))
    path = str(task.file_path)
    calls = {
        "read": ToolCall("Read", {"file_path": path}),
        "run": ToolCall("Bash", {"command": task.check, "description": "Run the check"}),
        "edit": ToolCall(
            "Edit", {"file_path": path, "old_string": task.old, "new_string": task.new}
        ),
    }
    call = calls.get(step)
    return call if call is not None and call.name in tools else None


def _codex_tools(body: dict[str, Any]) -> dict[str, str]:
    """Tool name → its type ("function", "custom", …) for the request's top-level tools."""
    return {
        str(t["name"]): str(t.get("type"))
        for t in body.get("tools", [])
        if isinstance(t, dict) and "name" in t
    }


def _codex_shell(tools: dict[str, str], command: str) -> ToolCall | None:
    if "exec_command" in tools:
        return ToolCall("exec_command", {"cmd": command})
    if "shell_command" in tools:
        return ToolCall("shell_command", {"command": command})
    if "shell" in tools:
        return ToolCall("shell", {"command": ["bash", "-lc", command]})
    return None


def _codex_call(task: Task, body: dict[str, Any]) -> ToolCall | None:
    tools = _codex_tools(body)
    step = step_of(responses_tool_results(body))
    if step == "read":
        return _codex_shell(tools, f"cat {task.file_name}")
    if step == "run":
        return _codex_shell(tools, task.check)
    if step != "edit":
        return None
    if tools.get("apply_patch") == "custom":
        return ToolCall("apply_patch", task.patch())
    if tools.get("apply_patch") == "function":
        return ToolCall("apply_patch", {"input": task.patch()})
    # no apply_patch tool: Codex runs a shell command that starts with apply_patch itself
    return _codex_shell(tools, f"apply_patch <<'PATCH'\n{task.patch()}PATCH")


# --- wire formats -----------------------------------------------------------------------------


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def _tokens(body: dict[str, Any]) -> int:
    """A rough prompt size (about four characters a token): the agents only display it."""
    return max(1, len(json.dumps(body)) // 4)


def _models() -> dict[str, Any]:
    model: dict[str, Any] = {"id": "standin", "object": "model", "type": "model"}
    model |= {"display_name": "standin", "created": 0, "created_at": "1970-01-01T00:00:00Z"}
    return {"object": "list", "data": [model], "has_more": False, "first_id": "standin"}


def _anthropic_usage(body: dict[str, Any], output_tokens: int) -> dict[str, int]:
    usage = {"input_tokens": _tokens(body), "output_tokens": output_tokens}
    return usage | {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _responses_usage(body: dict[str, Any]) -> dict[str, Any]:
    prompt, details = _tokens(body), {"cached_tokens": 0}
    usage = {"input_tokens": prompt, "input_tokens_details": details, "output_tokens": 12}
    return usage | {"output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + 12}


def _pieces(text: str, n: int = 3) -> list[str]:
    """``text`` in ``n`` pieces (deltas arrive split, as from a real server)."""
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse_response(events: Iterator[tuple[str, dict[str, Any]]]) -> StreamingResponse:
    def encode() -> Iterator[bytes]:
        for name, data in events:
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    return StreamingResponse(encode(), media_type="text/event-stream")


def _event(name: str, **data: Any) -> tuple[str, dict[str, Any]]:
    return name, {"type": name, **data}


def _anthropic_events(
    msg: dict[str, Any], call: ToolCall | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    yield _event("message_start", message={**msg, "content": [], "stop_reason": None})
    for index, block in enumerate(msg["content"]):
        empty = {**block, "text": ""} if block["type"] == "text" else block
        yield _event("content_block_start", index=index, content_block=empty)
        if block["type"] == "text":
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            assert call is not None
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(call.text)]
        for delta in deltas:
            yield _event("content_block_delta", index=index, delta=delta)
        yield _event("content_block_stop", index=index)
    stop = {"stop_reason": msg["stop_reason"], "stop_sequence": None}
    yield _event("message_delta", delta=stop, usage={"output_tokens": 12})
    yield _event("message_stop")


def _message_item(item_id: str, text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [part]}  # fmt: skip


def _call_item(item_id: str, call_id: str, call: ToolCall, body: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"id": item_id, "call_id": call_id, "name": call.name,
                            "status": "completed"}  # fmt: skip
    if _codex_tools(body).get(call.name) == "custom":
        return {"type": "custom_tool_call", **item, "input": call.text}
    return {"type": "function_call", **item, "arguments": call.text}


@dataclass
class _Seq:
    """Responses events carry a running ``sequence_number``."""

    n: int = 0

    def event(self, name: str, **data: Any) -> tuple[str, dict[str, Any]]:
        self.n += 1
        return _event(name, sequence_number=self.n - 1, **data)


def _responses_events(
    response: dict[str, Any], item: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    seq = _Seq()
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    yield seq.event("response.created", response=pending)
    yield seq.event("response.in_progress", response=pending)
    added = {**item, "status": "in_progress"}
    where = {"output_index": 0, "item_id": item["id"]}
    if item["type"] == "message":
        yield seq.event("response.output_item.added", output_index=0, item={**added, "content": []})
        yield from _text_events(seq, where, item["content"][0])
    else:
        key = "arguments" if item["type"] == "function_call" else "input"
        yield seq.event("response.output_item.added", output_index=0, item={**added, key: ""})
        kind = "function_call_arguments" if key == "arguments" else "custom_tool_call_input"
        for piece in _pieces(item[key]):
            yield seq.event(f"response.{kind}.delta", **where, delta=piece)
        yield seq.event(f"response.{kind}.done", **where, **{key: item[key]})
    yield seq.event("response.output_item.done", output_index=0, item=item)
    yield seq.event("response.completed", response=response)


def _text_events(
    seq: _Seq, where: dict[str, Any], part: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    empty = {**part, "text": ""}
    yield seq.event("response.content_part.added", **where, content_index=0, part=empty)
    for piece in _pieces(part["text"]):
        yield seq.event("response.output_text.delta", **where, content_index=0, delta=piece)
    yield seq.event("response.output_text.done", **where, content_index=0, text=part["text"])
    yield seq.event("response.content_part.done", **where, content_index=0, part=part)
