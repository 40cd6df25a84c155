"""Deterministic synthetic coding-agent text: a long context and small appended turns.

Coding agents send a long, stable context (system prompt, tool definitions, files read with
line numbers, diffs, shell output) and append a small turn (median ~1.4K characters) per
call. The generator mixes those shapes, including tabs, CRLF-free Unix text, digits and some
non-ASCII, so tokenizers and prefix caches see realistic material. Same seed, same text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

# An async token count (the server's /tokenize, or a local tokenizer behind a coroutine)
TokenCounter = Callable[[str], Coroutine[Any, Any, int]]

_WORDS = (
    "request token cache prefix server client latency queue batch schedule encode decode "
    "stream chunk buffer offset window merge split config probe metric engine worker thread "
    "handler session context append render template model prompt sample logits kernel"
).split()
_NON_ASCII = (
    "naïve café",
    "Grüße aus Köln",
    "日本語のコメント",
    "résumé — déjà vu",
    "Ελληνικά",
    "😀 ✅ ⚠️",
    "Привет, мир",
    "한국어 주석",
    "עברית",
)
_IDENT = ("tokens", "offsets", "prefix_len", "cache_hit", "max_batch", "num_seqs", "t0_ns", "buf")


def _source_block(rng: random.Random, start_line: int) -> str:
    name = f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
    lines = [f"def {name}({rng.choice(_IDENT)}, n={rng.randint(0, 4096)}):"]
    for _ in range(rng.randint(6, 18)):
        ident, word = rng.choice(_IDENT), rng.choice(_WORDS)
        lines.append(f"    {ident} = {word}({rng.randint(0, 99999)}, {rng.random():.4f})  # {word}")
    lines.append(f"    return {rng.choice(_IDENT)}")
    # `cat -n` style: right-aligned number, then a tab (a classic tokenizer seam)
    return "\n".join(f"{start_line + i:6d}\t{line}" for i, line in enumerate(lines)) + "\n"


def _diff_block(rng: random.Random) -> str:
    name = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
    a = rng.randint(1, 900)
    body = [f"--- a/{name}", f"+++ b/{name}", f"@@ -{a},4 +{a},5 @@"]
    for _ in range(4):
        body.append(f" {rng.choice(_IDENT)} = {rng.choice(_WORDS)}()")
    body.append(f"-    {rng.choice(_IDENT)} += {rng.randint(1, 64)}")
    body.append(f"+    {rng.choice(_IDENT)} += {rng.randint(1, 64)}  # {rng.choice(_NON_ASCII)}")
    return "\n".join(body) + "\n"


def _shell_block(rng: random.Random) -> str:
    rows = [f"$ pytest -q tests/test_{rng.choice(_WORDS)}.py"]
    for _ in range(rng.randint(3, 8)):
        rows.append(
            f"PASSED tests/test_{rng.choice(_WORDS)}.py::test_{rng.choice(_WORDS)}"
            f"  [{rng.randint(0, 100):3d}%]  {rng.random() * 3:.2f}s"
        )
    rows.append(
        f"==== {rng.randint(1, 300)} passed, {rng.randint(0, 3)} warnings in "
        f"{rng.random() * 40:.2f}s ===="
    )
    return "\n".join(rows) + "\n"


def _prose_block(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(30, 70))]
    words.insert(rng.randrange(len(words)), rng.choice(_NON_ASCII))
    return " ".join(words).capitalize() + ".\n"


class BuildStopped(Exception):
    """The caller asked :func:`build_context` to stop (the probe was interrupted)."""


def context_blocks(seed: int = 0) -> Iterator[str]:
    """Endless deterministic blocks of agent context.

    >>> blocks = context_blocks(1); next(blocks) == next(context_blocks(1))
    True
    """
    rng = random.Random(seed)
    line = 1
    while True:
        kind = rng.random()
        if kind < 0.45:
            block = _source_block(rng, line)
            line += block.count("\n")
        elif kind < 0.65:
            block = _diff_block(rng)
        elif kind < 0.85:
            block = _shell_block(rng)
        else:
            block = _prose_block(rng)
        yield block


# printable ASCII but the space, to its full-width form (U+FF01..U+FF5E): the same text,
# character for character, none of it ASCII but the white space
_FULL_WIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}


def non_ascii(text: str) -> str:
    r"""``text`` in full-width letters: the same structure and length, non-ASCII throughout
    (what a tokenizer's non-ASCII path meets, beside the ASCII original).

    >>> non_ascii("def f(x):\n    return 1")
    'ｄｅｆ ｆ（ｘ）：\n    ｒｅｔｕｒｎ １'
    """
    return text.translate(_FULL_WIDTH)


def agent_turn(index: int, *, seed: int = 0, chars: int = 1400) -> str:
    """A fresh turn of about ``chars`` characters; turn ``index`` is always the same text.

    >>> 1300 <= len(agent_turn(3)) <= 1500
    True
    """
    rng = random.Random(f"turn-{seed}-{index}")
    head = f"[turn {index}] tool result for `{rng.choice(_WORDS)}`:\n"
    parts: list[str] = [head]
    size = len(head)
    blocks = context_blocks(seed * 7919 + index + 1)
    while size < chars:
        block = next(blocks)
        parts.append(block)
        size += len(block)
    return "".join(parts)[:chars]


def build_context(
    target_tokens: int,
    count_tokens: Callable[[str], int],
    *,
    seed: int = 0,
    tolerance: float = 0.02,
    should_stop: Callable[[], bool] | None = None,
) -> str:
    """A context of about ``target_tokens`` tokens as counted by ``count_tokens``.

    ``count_tokens`` is the server's ``/tokenize`` or a local tokenizer; it is called a
    handful of times, not once per block. ``should_stop`` is polled while text is generated
    (the build runs on a worker thread, which nothing else can interrupt); when it answers
    True the build ends with :class:`BuildStopped`.

    >>> ctx = build_context(500, lambda s: len(s) // 4)
    >>> abs(len(ctx) // 4 - 500) <= 10
    True
    """
    if target_tokens <= 0:
        return ""
    blocks: list[str] = []
    gen = context_blocks(seed)
    chars_per_token = 3.0
    for _ in range(8):
        text = "".join(blocks)
        have = count_tokens(text) if text else 0
        if abs(have - target_tokens) <= target_tokens * tolerance:
            break
        if have > 0:
            chars_per_token = len(text) / have
        if have < target_tokens:
            want = int((target_tokens - have) * chars_per_token)
            size = 0
            while size < want:
                if should_stop is not None and len(blocks) % 64 == 0 and should_stop():
                    raise BuildStopped(f"stopped building a {target_tokens:,}-token context")
                blocks.append(next(gen))
                size += len(blocks[-1])
        else:
            cut = int(target_tokens * chars_per_token)
            return _trim_to(text, cut)
    return "".join(blocks)


def _trim_to(text: str, chars: int) -> str:
    r"""``text`` cut near ``chars`` and never mid-word: at a line end when one is close, else
    at a space (a small context from long lines lost up to 40% of its size to a line cut).

    >>> _trim_to("ab cd\nef gh ij kl", 16), _trim_to("ab cd\nef gh", 6)
    ('ab cd\nef gh ij ', 'ab cd\n')
    >>> _trim_to("alpha beta gamma\n" + "x" * 200, 100)  # never before the last line end
    'alpha beta gamma\n'
    """
    end = text.rfind("\n", 0, chars)
    if end > 0 and chars - end <= max(chars // 20, 1):
        return text[: end + 1]
    space = text.rfind(" ", max(end, 0), chars)  # a space after the last line end, if any
    if space > 0:
        return text[: space + 1]
    return text[: end + 1] if end > 0 else text[:chars]


async def build_context_async(tokens: int, seed: int, counter: TokenCounter) -> str:
    """:func:`build_context` on a worker thread, async counter.

    Cancelling the caller (Ctrl-C) tells the thread to stop; it does within ~0.1 s.

    >>> async def count(text: str) -> int:
    ...     return len(text) // 4
    >>> abs(len(asyncio.run(build_context_async(1000, 1, count))) // 4 - 1000) <= 20
    True
    """
    if tokens <= 0:
        return ""
    loop = asyncio.get_running_loop()
    stop = threading.Event()

    def count(text: str) -> int:
        fut = asyncio.run_coroutine_threadsafe(counter(text), loop)
        while True:
            if stop.is_set():
                fut.cancel()
                raise BuildStopped("stopped while counting tokens")
            try:
                return int(fut.result(timeout=0.1))
            except concurrent.futures.TimeoutError:
                continue

    try:
        return await asyncio.to_thread(
            build_context, tokens, count, seed=seed, should_stop=stop.is_set
        )
    except BaseException:
        stop.set()
        raise
