"""The session cache: exact ids on every path, no stolen state, bounded by bytes."""

from __future__ import annotations

import asyncio

import orjson

from ttftscope.agenttext import agent_turn, build_context
from ttftscope.gateway.pipeline.sessions import Encoded, SessionCache
from ttftscope.tokenization.loader import Tokenizer

SYSTEM = "<|im_start|>system\nYou are a coding agent.\n" + "shared tool definitions. " * 40


def _conversation(tok: Tokenizer, seed: int, turns: int) -> list[str]:
    """Prompts of one conversation as an agent sends them: each resends all and appends."""
    ctx = build_context(2000, lambda s: len(tok.encode(s)), seed=seed)
    prompts, text = [], SYSTEM + ctx
    for i in range(turns):
        text += f"<|im_start|>user\n{agent_turn(i, seed=seed)}<|im_end|>\n"
        prompts.append(text + "<|im_start|>assistant\n")
        text += "<|im_start|>assistant\nDone.<|im_end|>\n"
    return prompts


def _exact(got: Encoded, tok: Tokenizer, prompt: str) -> bool:
    """The ids of a full encode, the JSON sent upstream is exactly those ids, and no update
    fell back to a full encode (that would hide a broken incremental path behind equal ids)."""
    return (
        got.ids == tok.encode(prompt)
        and got.ids_json == orjson.dumps(got.ids)
        and not got.full_fallback
    )


def test_appends_reuse_the_session_and_ids_stay_exact(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    for i, prompt in enumerate(_conversation(qwen2, 1, 4)):
        got = asyncio.run(cache.encode(prompt))
        assert _exact(got, qwen2, prompt)
        if i:
            assert got.reused_tokens > 0.8 * len(got.ids) and got.encoded_chars < 3000
    assert cache.entries == 1 and cache.stats.forks == 0


def test_conversations_sharing_a_system_prompt_keep_their_own_state(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    a, b = _conversation(qwen2, 1, 3), _conversation(qwen2, 2, 3)
    for pa, pb in zip(a, b, strict=True):  # interleaved, as two agents on one gateway
        for prompt in (pa, pb):
            got = asyncio.run(cache.encode(prompt))
            assert _exact(got, qwen2, prompt)
    # after the first turn each conversation extends its own entry: appends, not re-encodes
    again = asyncio.run(cache.encode(a[-1] + "Sure.<|im_end|>\n"))
    assert again.path.startswith("append") and again.encoded_chars < 200
    assert cache.entries == 2


def test_concurrent_requests_of_one_conversation_fork_and_stay_exact(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    first, second = _conversation(qwen2, 3, 2)
    asyncio.run(cache.encode(first))

    async def both() -> list[Encoded]:
        return list(await asyncio.gather(cache.encode(second), cache.encode(second + "x")))

    for got, prompt in zip(asyncio.run(both()), [second, second + "x"], strict=True):
        assert _exact(got, qwen2, prompt)


def test_among_many_retries_of_one_history_the_matching_one_is_extended(
    qwen2: Tokenizer,
) -> None:
    """Retries (one history, a different last turn each) leave many entries sharing almost
    everything; a request continuing one of them still finds that one."""
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    history = _conversation(qwen2, 6, 1)[0]
    retries = [f"{history}Attempt {i}: ran the tests.<|im_end|>\n" for i in range(30)]
    for prompt in retries:
        assert _exact(asyncio.run(cache.encode(prompt)), qwen2, prompt)
    assert cache.entries == 30
    for i in (7, 29, 0):
        follow = retries[i] + "<|im_start|>user\nAnd now?<|im_end|>\n"
        got = asyncio.run(cache.encode(follow))
        assert _exact(got, qwen2, follow)
        assert got.path.startswith("append") and got.encoded_chars < 100


def test_an_entry_encoding_on_a_worker_thread_is_not_copied(qwen2: Tokenizer) -> None:
    """A long encode runs off the event loop; meanwhile its entry's state is changing, so a
    second request of that conversation starts its own encoder instead of copying it."""
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    long = SYSTEM + build_context(30_000, lambda s: len(qwen2.encode(s)), seed=5)
    prompts = [long + "<|im_start|>assistant\n", long + "<|im_start|>user\nhi"]
    assert len(long) > 64_000  # more than the cache encodes on the event loop

    async def both() -> list[Encoded]:
        return list(await asyncio.gather(*(cache.encode(p) for p in prompts)))

    for got, prompt in zip(asyncio.run(both()), prompts, strict=True):
        assert _exact(got, qwen2, prompt)
    assert cache.stats.forks == 0 and cache.entries == 2


def test_the_cache_stays_within_its_byte_bound(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=200_000)
    for seed in range(8):
        for prompt in _conversation(qwen2, 10 + seed, 1):
            assert _exact(asyncio.run(cache.encode(prompt)), qwen2, prompt)
    assert cache.stats.nbytes <= 200_000
    assert cache.stats.evictions > 0 and cache.entries < 8


def test_a_pinned_session_is_kept_apart(qwen2: Tokenizer) -> None:
    """Another pin forks the state (reusing it) and never extends it in place."""
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    first, second = _conversation(qwen2, 4, 2)
    asyncio.run(cache.encode(first, pin="agent-a"))
    other = asyncio.run(cache.encode(first, pin="agent-b"))
    assert _exact(other, qwen2, first) and other.path != "full"
    assert cache.entries == 2 and cache.stats.forks == 1
    again = asyncio.run(cache.encode(second, pin="agent-a"))  # a's own state, untouched
    assert _exact(again, qwen2, second) and again.path.startswith("append")
    assert cache.stats.forks == 1


def _session_start(tok: Tokenizer, seed: int) -> str:
    """An agent's first request: the same long system prompt and tools, its own first ask."""
    tools = build_context(12000, lambda s: len(tok.encode(s)), seed=99)  # ~12K, as Claude Code
    return SYSTEM + tools + f"<|im_start|>user\n{agent_turn(0, seed=seed)}<|im_end|>\n"


def test_a_new_session_starts_from_the_shared_prefix_of_another(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    a, b = _session_start(qwen2, 1), _session_start(qwen2, 2)
    assert asyncio.run(cache.encode(a, pin="session-1")).path == "full"
    got = asyncio.run(cache.encode(b, pin="session-2"))
    assert _exact(got, qwen2, b)
    assert got.encoded_chars <= 0.1 * len(b), (got.encoded_chars, len(b))
    assert got.reused_tokens >= 0.9 * len(got.ids)


def test_a_request_without_a_session_header_finds_a_pinned_state(qwen2: Tokenizer) -> None:
    cache = SessionCache(qwen2, max_bytes=64 << 20)
    a, b = _session_start(qwen2, 3), _session_start(qwen2, 4)
    asyncio.run(cache.encode(a, pin="session-1"))
    got = asyncio.run(cache.encode(b))
    assert _exact(got, qwen2, b) and got.encoded_chars <= 0.1 * len(b)
    pinned = asyncio.run(cache.encode(_session_start(qwen2, 5), pin="session-9"))
    assert pinned.encoded_chars <= 0.1 * len(b)  # and the other way round
