"""Which session the byte bound evicts: the least recently used, never one still encoding."""

from __future__ import annotations

import asyncio

from ttftscope.agenttext import agent_turn, build_context
from ttftscope.gateway.pipeline.sessions import Encoded, SessionCache
from ttftscope.gateway.runtime.workpool import WorkPool
from ttftscope.tokenization.loader import Tokenizer

SYSTEM = "<|im_start|>system\nYou are a coding agent.\n" + "shared tool definitions. " * 40


def _turns(tok: Tokenizer, seed: int, context: int = 2000) -> tuple[str, str]:
    """A conversation's first prompt and the next one, which resends it and appends."""
    first = SYSTEM + build_context(context, lambda s: len(tok.encode(s)), seed=seed)
    first += f"<|im_start|>user\n{agent_turn(0, seed=seed)}<|im_end|>\n"
    return first, first + f"<|im_start|>assistant\nDone.<|im_end|>\n{agent_turn(1, seed=seed)}"


def _reused(got: Encoded, tok: Tokenizer, prompt: str) -> bool:
    """Exact ids, by extending the conversation's own state (its last turn re-encoded)."""
    tail = len(prompt) - len(prompt.rsplit("<|im_start|>assistant", 1)[0])
    return got.ids == tok.encode(prompt) and got.path == "append" and got.encoded_chars <= 2 * tail


def test_the_least_recently_used_session_is_evicted_not_the_oldest(qwen2: Tokenizer) -> None:
    (a, a_next), (b, b_next), (c, _) = (_turns(qwen2, seed) for seed in (1, 2, 3))
    probe = SessionCache(qwen2, max_bytes=1 << 30)
    asyncio.run(probe.encode(a))
    one = probe.stats.nbytes  # what one conversation holds
    cache = SessionCache(qwen2, max_bytes=int(2.5 * one))  # room for two of the three
    for prompt in (a, b, a, c):  # a used again after b: b is the least recently used
        asyncio.run(cache.encode(prompt))
    assert cache.stats.evictions == 1 and cache.entries == 2
    assert _reused(asyncio.run(cache.encode(a_next)), qwen2, a_next)  # a was kept
    assert not _reused(asyncio.run(cache.encode(b_next)), qwen2, b_next)  # b was evicted


def test_a_session_still_encoding_is_never_evicted(qwen2: Tokenizer) -> None:
    """A long encode runs on a worker thread; a short request answered meanwhile goes over
    the bound, and the entry it evicts is its own, never the one being encoded."""
    long, long_next = _turns(qwen2, 5, context=30_000)
    short = "<|im_start|>system\nanother agent\n<|im_end|>\n"
    cache = SessionCache(qwen2, max_bytes=1, pool=WorkPool(workers=1, queue=4))

    async def together() -> None:
        # gather starts the long one first: it reaches its thread before the short one runs
        await asyncio.gather(cache.encode(long), cache.encode(short))

    asyncio.run(together())
    assert cache.stats.evictions == 1 and cache.entries == 1
    assert _reused(asyncio.run(cache.encode(long_next)), qwen2, long_next)
