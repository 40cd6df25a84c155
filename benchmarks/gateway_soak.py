"""The gateway under agent load: does one cold 100K-token conversation stall everyone else?

A fake vLLM 0.32 (this file run with ``--upstream PORT``, its own process) answers chat-ids
requests at once, streaming 16 chunks 10 ms apart, and names in each answer's ``id`` a hash
of the token ids it received. The gateway runs in its own process (``ttftscope gateway``,
as users run it) with a real tokenizer and chat template (the offline Qwen2 fixture) and a
small ``cache_mb`` so that the session cache churns. This process is the clients:

1. idle: small chats alone, one every ``--small-every-ms``: their p99 is the baseline;
2. cold: ``--cold`` conversations of ~``--tokens`` tokens arrive at once, small chats
   still ticking: their p99 while the cold prompts encode;
3. churn: every conversation (``--conversations``), cold then ``--turns - 1`` warm turns
   (a tool result and a reply appended), ``--concurrency`` at a time; one client in four
   reads its stream slowly and one in eight leaves after the first event.

Then the gateway's RSS (``/proc``) against its ``cache_mb``, and its cache's bytes per cached
conversation scaled to 100K tokens (its ``/metrics``). Ids are checked on the conversations
``i % --verify-every == 0``: the hash the upstream saw against a full encode of the same
rendering here. The machine's other load shows in the latencies; run it on a quiet machine.
Prints figures; the last line is JSON with ``small_chat_p99_idle_ms``,
``small_chat_p99_cold_ms``, ``stall_ratio``, ``mb_per_100k_conversation``,
``rss_over_cache_mb``, ``mismatches``.

    python benchmarks/gateway_soak.py            # ~5 minutes on 2 cores
    python benchmarks/gateway_soak.py --quick    # a few seconds: the figures are not targets
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import aiohttp
import httpx
import orjson

MODEL = "soak"
MAX_MODEL_LEN = 262_144
Message = MutableMapping[str, Any]


# --- the fake upstream (its own process) ---------------------------------------------------
def ids_hash(ids: list[int]) -> str:
    return hashlib.sha1(orjson.dumps(ids)).hexdigest()[:16]


async def upstream_app(
    scope: Message, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Any]
) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    routes = {
        "/v1/models": {"data": [{"id": MODEL, "object": "model", "max_model_len": MAX_MODEL_LEN}]},
        "/version": {"version": "0.32.0"},
    }
    if scope["method"] == "GET":
        await _send_json(send, routes.get(scope["path"], {}))
        return
    request = orjson.loads(body)
    ids = (request.get("kv_transfer_params") or {}).get("prompt_token_ids") or []
    tag = ids_hash(ids) if ids else "text"
    usage = {"prompt_tokens": len(ids), "completion_tokens": 16}
    if not request.get("stream"):
        await _send_json(send, {"id": tag, "choices": [], "usage": usage})
        return
    start = {"type": "http.response.start", "status": 200}
    await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
    for i in range(16):
        chunk = {"id": tag, "choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
        await send({"type": "http.response.body", "body": _sse(chunk), "more_body": True})
        await asyncio.sleep(0.01)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def _sse(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _send_json(send: Callable[[Message], Any], obj: object) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": orjson.dumps(obj)})


# --- processes ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def started(cmd: list[str], health: str) -> Iterator[subprocess.Popen[bytes]]:
    """``cmd`` in its own process, once ``health`` answers 200; stopped on exit."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{' '.join(cmd[:5])} did not start")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(health, timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def workers_ready(gw: str, processes: int | None, bound_s: float = 120.0) -> None:
    """Wait until the gateway's encode workers have loaded their tokenizers: the idle phase
    is the gateway at rest, not starting up."""
    from ttftscope.config.schema import GatewaySettings

    wanted = GatewaySettings().encode_processes if processes is None else processes
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        ready = gauge(httpx.get(gw + "/metrics").text, "ttftscope_gateway_encode_processes")
        if wanted == 0 or ready >= wanted:
            return
        time.sleep(0.1)
    raise SystemExit(f"the gateway's encode workers were not ready within {bound_s:g} s")


def workers_rss_mb(pid: int) -> float:
    """RSS of ``pid``'s child processes (the gateway's encode workers), MB."""
    kids = [
        int(k) for f in Path(f"/proc/{pid}/task").glob("*/children") for k in f.read_text().split()
    ]
    return sum(rss_mb(k) for k in kids)


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def gauge(metrics: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", metrics, re.M)
    return float(match.group(1)) if match else float("nan")


# --- the workload -----------------------------------------------------------------------------
@dataclass
class Conversation:
    index: int
    messages: list[dict[str, str]]
    turns: list[bytes] = field(default_factory=list)  # request bodies, one per turn
    expected: list[str] = field(default_factory=list)  # id hashes (verified conversations)
    tokens: int = 0  # of the last turn


def build(args: argparse.Namespace, folder: Path) -> list[Conversation]:
    """Every conversation's request bodies, and the id hashes a full encode gives."""
    from ttftscope.agenttext import agent_turn
    from ttftscope.gateway.vllm_chat import prepare_chat
    from ttftscope.tokenization.chat import ChatRenderer
    from ttftscope.tokenization.loader import load_tokenizer

    tok = load_tokenizer(folder)
    renderer = ChatRenderer(tok)
    sample = "".join(agent_turn(i, seed=99) for i in range(20))
    chars_per_token = len(sample) / len(tok.encode(sample))
    convs: list[Conversation] = []
    checked: list[tuple[Conversation, str]] = []
    for c in range(args.conversations):
        system = f"You are coding agent {c}. Session {random.Random(c).random()}."
        messages = [{"role": "system", "content": system}]
        i = 0
        while sum(len(m["content"]) for m in messages) < args.tokens * chars_per_token:
            role = "user" if i % 2 == 0 else "assistant"
            messages.append({"role": role, "content": agent_turn(i, seed=c + 1)})
            i += 1
        conv = Conversation(c, messages)
        for t in range(args.turns):
            if t:
                conv.messages = [
                    *conv.messages,
                    {"role": "assistant", "content": f"Reply {t} of conversation {c}."},
                    {"role": "user", "content": agent_turn(1000 + t, seed=c + 1)},
                ]
            body = {"model": MODEL, "messages": conv.messages, "max_tokens": 16, "stream": True}
            conv.turns.append(orjson.dumps(body))
            if c % args.verify_every == 0 or t == args.turns - 1:
                inputs = prepare_chat(body, renderer.source)
                prompt = renderer.render(
                    inputs.messages, tools=inputs.tools, **inputs.template_kwargs
                )
                checked.append((conv, prompt))
        convs.append(conv)
    encodings = tok.hf.encode_batch([p for _, p in checked], add_special_tokens=False)
    for (conv, _), enc in zip(checked, encodings, strict=True):
        conv.tokens = len(enc.ids)
        if conv.index % args.verify_every == 0:
            conv.expected.append(ids_hash(enc.ids))
    return convs


@dataclass
class Tally:
    mismatches: int = 0
    verified: int = 0
    refused: int = 0  # 503 (admission control)
    left: int = 0
    errors: list[str] = field(default_factory=list)


SMALL = orjson.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
JSON = {"content-type": "application/json"}


async def small_chats(
    client: aiohttp.ClientSession,
    url: str,
    every_s: float,
    stop: asyncio.Event,
    out: list[float],
    failed: list[int],
) -> None:
    """One small non-streaming chat every ``every_s`` until ``stop``; latencies in ms."""
    pending: set[asyncio.Task[None]] = set()

    async def one() -> None:
        t0 = time.perf_counter()
        try:
            async with client.post(url, data=SMALL, headers=JSON) as resp:
                await resp.read()
                ok = resp.status == 200
        except aiohttp.ClientError:
            ok = False
        if ok:
            out.append((time.perf_counter() - t0) * 1000)
        else:
            failed.append(1)

    while not stop.is_set():
        task = asyncio.create_task(one())
        pending.add(task)
        task.add_done_callback(pending.discard)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
    await asyncio.gather(*pending)


async def turn(
    client: aiohttp.ClientSession, url: str, conv: Conversation, t: int, kind: str, tally: Tally
) -> None:
    """Send turn ``t`` of ``conv`` as a ``kind`` client (normal, slow, leaving)."""
    headers = {"content-type": "application/json", "x-ttftscope-session": f"soak-{conv.index}"}
    first = b""
    try:
        async with client.post(url, data=conv.turns[t], headers=headers) as resp:
            if resp.status != 200:
                tally.refused += resp.status == 503
                if resp.status != 503:
                    tally.errors.append(f"HTTP {resp.status}: {(await resp.read())[:200]!r}")
                return
            async for chunk in resp.content.iter_any():
                if not first:
                    first = chunk
                    if kind == "leaving":
                        tally.left += 1
                        break
                if kind == "slow":
                    await asyncio.sleep(0.02)
    except aiohttp.ClientError as exc:
        tally.errors.append(f"{type(exc).__name__}: {exc}")
        return
    match = re.search(rb'"id":"([^"]+)"', first)
    if conv.expected and match:
        tally.verified += 1
        tally.mismatches += match.group(1).decode() != conv.expected[t]


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else 0.0


async def drive(
    args: argparse.Namespace, base: str, convs: list[Conversation], upstream: str
) -> dict[str, Any]:
    url = base + "/v1/chat/completions"
    tally = Tally()
    # idle connections closed before the gateway's own keep-alive timeout (5 s) closes them
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=3)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        for _ in range(20):  # warm-up: connections, the template, the small chat's session
            async with client.post(url, data=SMALL, headers=JSON) as resp:
                await resp.read()
        phases: dict[str, list[float]] = {"idle": [], "cold": [], "churn": []}
        direct: dict[str, list[float]] = {"idle": [], "cold": [], "churn": []}
        direct_failed: list[int] = []
        small_failed: list[int] = []
        every = args.small_every_ms / 1000

        async def with_small_chats(name: str, work: Awaitable[Any]) -> float:
            stop = asyncio.Event()
            ticker = asyncio.create_task(
                small_chats(client, url, every, stop, phases[name], small_failed)
            )
            # the same small chat straight to the upstream: what the machine, the clients and
            # the upstream cost without the gateway (the floor its latencies stand on)
            direct_url = upstream + "/v1/chat/completions"
            direct_ticker = asyncio.create_task(
                small_chats(client, direct_url, every, stop, direct[name], direct_failed)
            )
            t0 = time.perf_counter()
            await work
            stop.set()
            await ticker
            await direct_ticker
            return time.perf_counter() - t0

        await with_small_chats("idle", asyncio.sleep(args.idle_s))
        cold = convs[: args.cold]
        cold_s = await with_small_chats(
            "cold", asyncio.gather(*(turn(client, url, c, 0, "normal", tally) for c in cold))
        )
        slots = asyncio.Semaphore(args.concurrency)

        async def conversation(conv: Conversation) -> None:
            for t in range(1 if conv in cold else 0, args.turns):
                kind = (
                    "leaving"
                    if conv.index % 8 == 3
                    else "slow"
                    if conv.index % 4 == 1
                    else "normal"
                )
                async with slots:
                    await turn(client, url, conv, t, kind, tally)

        churn_s = await with_small_chats("churn", asyncio.gather(*(conversation(c) for c in convs)))
    return {
        "phases": phases,
        "tally": tally,
        "cold_s": cold_s,
        "churn_s": churn_s,
        "small_failed": len(small_failed),
        "direct": direct,
        "direct_failed": len(direct_failed),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", type=int, help=argparse.SUPPRESS)  # run as the fake upstream
    ap.add_argument("--quick", action="store_true", help="small sizes: a few seconds")
    ap.add_argument("--conversations", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=100_000, help="tokens per conversation")
    ap.add_argument("--cold", type=int, default=6, help="cold conversations arriving at once")
    ap.add_argument("--turns", type=int, default=3, help="turns per conversation")
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--cache-mb", type=int, default=64, help="the gateway's cache_mb")
    ap.add_argument("--small-every-ms", type=float, default=20.0)
    ap.add_argument("--idle-s", type=float, default=5.0)
    ap.add_argument("--verify-every", type=int, default=4)
    ap.add_argument("--model-dir", type=Path, help="tokenizer + template (default: Qwen2 fixture)")
    ap.add_argument(
        "--encode-processes", type=int, help="the gateway's encode_processes (0: threads only)"
    )
    args = ap.parse_args()
    if args.upstream:
        import uvicorn

        uvicorn.run(
            upstream_app,
            host="127.0.0.1",
            port=args.upstream,
            log_level="critical",
            loop="uvloop",
            http="httptools",
            access_log=False,
        )
        return
    if args.quick:
        args.conversations, args.tokens, args.cold, args.turns = 6, 4000, 3, 2
        args.cache_mb, args.idle_s, args.verify_every = 8, 1.0, 1
    if args.model_dir is None:
        # the repository root: the tokenizer fixtures are the tests' tooling, not installed
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.tokenizer_fixtures.fixtures import build_all

        args.model_dir = build_all(["qwen2"])["qwen2"]  # a real tokenizer and template, offline
    t0 = time.perf_counter()
    convs = build(args, args.model_dir)
    print(
        f"{len(convs)} conversations built and encoded in {time.perf_counter() - t0:.0f} s",
        file=sys.stderr,
    )
    up_port, gw_port = _free_port(), _free_port()
    up = f"http://127.0.0.1:{up_port}"
    with TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        procs = args.encode_processes
        processes = "" if procs is None else f"encode_processes = {procs}\n"
        config.write_text(
            f"[gateway]\nport = {gw_port}\ncache_mb = {args.cache_mb}\nverify_first = 0\n"
            f"shadow_every = 0\n{processes}[gateway.upstreams.soak]\n"
            f"base_url = {json.dumps(up + '/v1')}\n"
            f"model_dir = {json.dumps(str(args.model_dir))}\n"
        )
        gw_cmd = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
        gw_cmd += ["gateway", "--config", str(config)]
        gw = f"http://127.0.0.1:{gw_port}"
        with (
            started([sys.executable, __file__, "--upstream", str(up_port)], up + "/v1/models"),
            started(gw_cmd, gw + "/health") as gw_proc,
        ):
            workers_ready(gw, args.encode_processes)
            rss_start = rss_mb(gw_proc.pid)
            out = asyncio.run(drive(args, gw, convs, up))
            time.sleep(1.0)
            rss_end = rss_mb(gw_proc.pid)
            rss_workers = workers_rss_mb(gw_proc.pid)
            metrics = httpx.get(gw + "/metrics").text
    entries = gauge(metrics, "ttftscope_gateway_session_cache_entries")
    cached = gauge(metrics, "ttftscope_gateway_session_cache_bytes")
    tokens = statistics.mean(c.tokens for c in convs)
    phases, tally = out["phases"], out["tally"]
    idle, cold = p99(phases["idle"]), p99(phases["cold"])
    result = {
        "conversations": args.conversations,
        "tokens_per_conversation": round(tokens),
        "small_chats": {k: len(v) for k, v in phases.items()},
        "small_chat_p50_idle_ms": round(statistics.median(phases["idle"]), 2),
        "small_chat_p99_idle_ms": round(idle, 2),
        "small_chat_p99_cold_ms": round(cold, 2),
        "small_chat_max_cold_ms": round(max(phases["cold"], default=0.0), 2),
        "small_chat_p99_churn_ms": round(p99(phases["churn"]), 2),
        "stall_ratio": round(cold / idle, 2) if idle else None,
        # the same small chats sent straight to the fake upstream at the same time
        "direct_p99_idle_ms": round(p99(out["direct"]["idle"]), 2),
        "direct_p99_cold_ms": round(p99(out["direct"]["cold"]), 2),
        "direct_p99_churn_ms": round(p99(out["direct"]["churn"]), 2),
        "cold_phase_s": round(out["cold_s"], 2),
        "churn_phase_s": round(out["churn_s"], 2),
        "cache_entries": entries,
        "mb_per_100k_conversation": round(cached / entries / (1 << 20) * 100_000 / tokens, 3)
        if entries
        else None,
        "cache_mb": args.cache_mb,
        "rss_start_mb": round(rss_start, 1),
        "rss_after_churn_mb": round(rss_end, 1),
        "rss_workers_mb": round(rss_workers, 1),  # the encode processes, counted below
        "rss_over_cache_mb": round(rss_end + rss_workers - args.cache_mb, 1),
        "verified_requests": tally.verified,
        "mismatches": tally.mismatches,
        "refused_503": tally.refused,
        "small_chats_failed": out["small_failed"],
        "direct_chats_failed": out["direct_failed"],
        "clients_left": tally.left,
        "errors": tally.errors[:5],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
