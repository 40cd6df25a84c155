"""The gateway under agent load: what does it add to a small chat's latency while cold
100K-token conversations encode?

Two fake vLLM 0.32 (``soak_servers.py``, each its own process) answer chat-ids requests at
once, streaming 16 chunks 10 ms apart, and name in each answer's ``id`` a hash of the token
ids they received: one for the long conversations, one for the small chats. The gateway runs
in its own process (``ttftscope gateway``, as users run it) with a real tokenizer and chat
template (the offline Qwen2 fixture) and a small ``cache_mb`` so that the session cache
churns. This process is the clients. Every ``--small-every-ms`` one small chat goes to the
gateway and the same chat, at the same instant, straight to its upstream: a pair. The
direct one is what the machine, the clients and the upstream cost in that window without the
gateway, so ``gateway_added_p99_ms`` (gateway p99 minus direct p99 of the same pairs) is the
gateway's own share, however loaded the machine is. Phases:

1. idle: small chats alone for ``--idle-s``;
2. cold: ``--cold`` cold conversations of ~``--tokens`` tokens in flight at all times (a new
   one starts when one is answered: a conversation's first turn under a system prompt that
   starts differently, so nothing cached shares its prefix) until ``--cold-chats`` pairs
   have been timed: the gateway-added p99 while cold prompts encode, the headline;
3. churn (unless ``--no-churn``): every conversation (``--conversations``), cold then
   ``--turns - 1`` warm turns (a tool result and a reply appended), ``--concurrency`` at a
   time; one client in four reads its stream slowly and one in eight leaves after the first
   event.

Then the gateway's RSS (``/proc``) against its ``cache_mb``, and its cache's bytes per cached
conversation scaled to 100K tokens (its ``/metrics``). Ids are checked on the conversations
``i % --verify-every == 0`` in the churn (the cold phase's variants are not checked): the
hash the upstream saw against a full encode of the same rendering here.
``--encode-processes 0,2 --rounds 2`` runs the gateway configurations in turn (0, 2, 0, 2;
"auto" too) on the same conversations, a fresh gateway each. Prints JSON lines: one per
phase of each run (``phase``, ``pairs``, gateway and direct p50/p99, ``gateway_added_p99_ms``,
``paired_added_p99_ms``: the p99 of each pair's difference), one per run with every figure
(``gateway_added_p99_cold_ms``, ``mb_per_100k_conversation``, ``rss_over_cache_mb``,
``mismatches``, ...), and after several runs a ``summary`` line per configuration.

    python benchmarks/gateway_soak.py            # ~4 minutes on 2 cores
    python benchmarks/gateway_soak.py --encode-processes 0,2 --rounds 2 --no-churn
    python benchmarks/gateway_soak.py --quick    # a few seconds: the figures are not targets
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import aiohttp
import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak_pairs import JSON, SMALL, SMALL_MODEL, Pairs, compare, figures, small_chats
from soak_servers import (
    free_port,
    gauge,
    ids_hash,
    processes,
    rss_mb,
    started,
    workers_ready,
    workers_rss_mb,
)

MODEL = "soak"
UPSTREAM = str(Path(__file__).resolve().parent / "soak_servers.py")


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
    from ttftscope.gateway.pipeline.vllm_chat import prepare_chat
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


@dataclass
class Run:
    """What one gateway's phases measured."""

    pairs: dict[str, Pairs] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)  # the 1-minute load at each start
    cold_conversations: int = 0
    tally: Tally = field(default_factory=Tally)


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


async def with_small_chats(
    client: aiohttp.ClientSession,
    urls: tuple[str, str],
    args: argparse.Namespace,
    run: Run,
    name: str,
    work: Awaitable[Any],
) -> None:
    """``work``, the small chats ticking meanwhile, as phase ``name`` of ``run``."""
    stop, pairs = asyncio.Event(), Pairs()
    run.pairs[name], run.load[name] = pairs, os.getloadavg()[0]
    ticker = asyncio.create_task(small_chats(client, urls, args.small_every_ms / 1000, stop, pairs))
    t0 = time.perf_counter()
    try:
        await work
    finally:
        stop.set()
        await ticker
    run.seconds[name] = time.perf_counter() - t0


def cold_variant(conv: Conversation, k: int) -> Conversation:
    """``conv``'s first turn under a system prompt that starts differently (``k``): a prompt
    no cached one shares a prefix with, however many have been sent (not verified)."""
    system, *rest = conv.messages
    messages = [{**system, "content": f"[cold {k}] " + system["content"]}, *rest]
    body = {"model": MODEL, "messages": messages, "max_tokens": 16, "stream": True}
    return Conversation(-1 - k, messages, turns=[orjson.dumps(body)])


async def cold_phase(
    client: aiohttp.ClientSession,
    url: str,
    args: argparse.Namespace,
    run: Run,
    convs: list[Conversation],
) -> None:
    """``--cold`` cold conversations in flight at all times until ``--cold-chats`` pairs are
    timed: each a variant of one of ``convs`` that nothing cached shares a prefix with."""

    async def lane() -> None:
        while len(run.pairs["cold"].gateway) < args.cold_chats:
            k = run.cold_conversations
            run.cold_conversations += 1
            conv = cold_variant(convs[k % len(convs)], k)
            await turn(client, url, conv, 0, "normal", run.tally)

    await asyncio.gather(*(lane() for _ in range(args.cold)))


async def churn_phase(
    client: aiohttp.ClientSession,
    url: str,
    args: argparse.Namespace,
    run: Run,
    convs: list[Conversation],
) -> None:
    """Every conversation's turns, cold then warm, ``--concurrency`` at a time."""
    slots = asyncio.Semaphore(args.concurrency)

    async def conversation(conv: Conversation) -> None:
        kind = "leaving" if conv.index % 8 == 3 else "slow" if conv.index % 4 == 1 else "normal"
        for t in range(args.turns):
            async with slots:
                await turn(client, url, conv, t, kind, run.tally)

    await asyncio.gather(*(conversation(c) for c in convs))


async def drive(
    args: argparse.Namespace, base: str, convs: list[Conversation], small_upstream: str
) -> Run:
    url = base + "/v1/chat/completions"
    urls = (url, small_upstream + "/v1/chat/completions")
    run = Run()
    # idle connections closed before the gateway's own keep-alive timeout (5 s) closes them
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=3)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        for _ in range(20):  # warm-up: connections, the template, the small chat's session
            for warm in urls:
                async with client.post(warm, data=SMALL, headers=JSON) as resp:
                    await resp.read()
        phase = with_small_chats
        await phase(client, urls, args, run, "idle", asyncio.sleep(args.idle_s))
        await phase(client, urls, args, run, "cold", cold_phase(client, url, args, run, convs))
        if not args.no_churn:
            churn = churn_phase(client, url, args, run, convs)
            await phase(client, urls, args, run, "churn", churn)
    return run


def gateway_config(
    args: argparse.Namespace, procs: int | str | None, port: int, up: str, small: str
) -> str:
    """The gateway's config: the conversations' upstream and the small chats', one model
    folder (so one tokenizer) for both. The gateway splits ``cache_mb`` evenly between its
    upstreams: it gets twice ``--cache-mb``, so that the conversations have that much, and
    RSS is judged against ``--cache-mb`` alone (the small chats' share holds one entry)."""
    processes = "" if procs is None else f"encode_processes = {json.dumps(procs)}\n"
    folder = json.dumps(str(args.model_dir))
    return (
        f"[gateway]\nport = {port}\ncache_mb = {2 * args.cache_mb}\nverify_first = 0\n"
        f"shadow_every = 0\n{processes}"
        f"[gateway.upstreams.soak]\nbase_url = {json.dumps(up + '/v1')}\nmodel_dir = {folder}\n"
        f"[gateway.upstreams.small]\nbase_url = {json.dumps(small + '/v1')}\n"
        f"model_dir = {folder}\n"
    )


def run_gateway(
    args: argparse.Namespace,
    convs: list[Conversation],
    procs: int | str | None,
    label: dict[str, Any],
) -> dict[str, Any]:
    """One fresh gateway (and its upstreams) through the phases; prints a JSON line per
    phase and returns the run's figures."""
    up_port, small_port, gw_port = free_port(), free_port(), free_port()
    up, small = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{small_port}"
    gw = f"http://127.0.0.1:{gw_port}"
    with TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        config.write_text(gateway_config(args, procs, gw_port, up, small))
        gw_cmd = [sys.executable, "-c", "from ttftscope.cli import main; main()"]
        gw_cmd += ["gateway", "--config", str(config)]
        with (
            started([sys.executable, UPSTREAM, str(up_port), MODEL], up + "/v1/models"),
            started([sys.executable, UPSTREAM, str(small_port), SMALL_MODEL], small + "/v1/models"),
            started(gw_cmd, gw + "/health") as gw_proc,
        ):
            workers = workers_ready(gw, processes(procs))
            rss_start = rss_mb(gw_proc.pid)
            run = asyncio.run(drive(args, gw, convs, small))
            time.sleep(1.0)
            rss_end = rss_mb(gw_proc.pid)
            rss_workers = workers_rss_mb(gw_proc.pid)
            metrics = httpx.get(gw + "/metrics").text
    phases = {}
    for name, pairs in run.pairs.items():
        phases[name] = figures(pairs)
        line = {**label, "phase": name, **phases[name], "seconds": round(run.seconds[name], 2)}
        print(json.dumps({**line, "load_1min": run.load[name]}), flush=True)
    return summary(
        args, convs, label, workers, run, phases, metrics, (rss_start, rss_end, rss_workers)
    )


def summary(
    args: argparse.Namespace,
    convs: list[Conversation],
    label: dict[str, Any],
    workers: int,
    run: Run,
    phases: dict[str, dict[str, Any]],
    metrics: str,
    rss: tuple[float, float, float],
) -> dict[str, Any]:
    # the gauges sum every upstream's cache: the small chats' holds one entry ("hi"), left
    # out of the count but not out of the bytes (a few KB more per conversation, not less)
    entries = gauge(metrics, "ttftscope_gateway_session_cache_entries") - 1
    cached = gauge(metrics, "ttftscope_gateway_session_cache_bytes")
    tokens = statistics.mean(c.tokens for c in convs)
    tally = run.tally
    out = {
        **label,
        "encode_processes_running": workers,
        "conversations": args.conversations,
        "tokens_per_conversation": round(tokens),
        "cold_conversations": run.cold_conversations,
        "small_chat_pairs": {k: v["pairs"] for k, v in phases.items()},
        **{f"gateway_added_p99_{k}_ms": v["gateway_added_p99_ms"] for k, v in phases.items()},
        **{f"gateway_p99_{k}_ms": v["gateway_p99_ms"] for k, v in phases.items()},
        **{f"direct_p99_{k}_ms": v["direct_p99_ms"] for k, v in phases.items()},
        **{f"{k}_phase_s": round(s, 2) for k, s in run.seconds.items()},
        "cache_entries": entries,
        "mb_per_100k_conversation": round(cached / entries / (1 << 20) * 100_000 / tokens, 3)
        if entries > 0
        else None,
        "cache_mb": args.cache_mb,
        "rss_start_mb": round(rss[0], 1),
        "rss_after_run_mb": round(rss[1], 1),
        "rss_workers_mb": round(rss[2], 1),  # the encode processes, counted below
        "rss_over_cache_mb": round(rss[1] + rss[2] - args.cache_mb, 1),
        "verified_requests": tally.verified,
        "mismatches": tally.mismatches,
        "refused_503": tally.refused,
        "clients_left": tally.left,
        "errors": tally.errors[:5],
    }
    return out


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a few seconds")
    ap.add_argument("--conversations", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=100_000, help="tokens per conversation")
    ap.add_argument("--cold", type=int, default=6, help="cold conversations in flight")
    ap.add_argument("--cold-chats", type=int, default=200, help="pairs timed while cold")
    ap.add_argument("--turns", type=int, default=3, help="turns per conversation")
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--cache-mb", type=int, default=64, help="the gateway's cache_mb")
    ap.add_argument("--small-every-ms", type=float, default=20.0)
    ap.add_argument("--idle-s", type=float, default=5.0)
    ap.add_argument("--verify-every", type=int, default=4)
    ap.add_argument("--no-churn", action="store_true", help="idle and cold phases only")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each configuration")
    ap.add_argument("--model-dir", type=Path, help="tokenizer + template (default: Qwen2 fixture)")
    ap.add_argument(
        "--encode-processes",
        help="the gateway's encode_processes, or several to compare (0,2); default: its default",
    )
    args = ap.parse_args()
    if args.quick:
        args.conversations, args.tokens, args.cold, args.turns = 6, 4000, 3, 2
        args.cache_mb, args.idle_s, args.verify_every, args.cold_chats = 8, 1.0, 1, 20
    return args


def main() -> None:
    args = parse_args()
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
    configs = [None] if args.encode_processes is None else args.encode_processes.split(",")
    runs = []
    for r in range(args.rounds):
        for config in configs:
            procs = config if config in (None, "auto") else int(config)
            label = {"config": config or "default", "encode_processes": procs, "round": r + 1}
            runs.append(run_gateway(args, convs, procs, label))
            print(json.dumps(runs[-1]), flush=True)
    if len(runs) > 1:
        compare(runs)


if __name__ == "__main__":
    main()
