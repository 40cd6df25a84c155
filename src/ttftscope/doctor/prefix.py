"""Prefix diff: how much of request A's prompt request B could have reused, and what broke it.

Both bodies are rendered as the server would see them: with the chat template when a
tokenizer is given (messages and tools, generation prompt added; a completions ``prompt`` as
it is), else as canonical JSON of the fields that reach the prompt (``system``, ``tools``,
``functions``, ``documents``, ``messages``, ``prompt``, in that order, keys inside them in
the order sent, because a reordered key changes the prompt too).

What B could reuse of A: the part of A's prompt that any continuation of A's conversation
starts with, i.e. the common prefix of A's rendering and the rendering of A's messages plus
one more assistant turn (for a completions prompt: all of it). That is A minus nothing but
what a template writes after the last message only when it is last. ``shared`` is what B
actually starts with; the loss is the difference, counted in characters, tokens and the full
KV blocks prefix caching reuses.

May import tokenization, errors and the other prefix modules (``dynamic``, ``logged_bodies``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ttftscope.doctor.dynamic import (
    DynamicValue,
    common_prefix,
    find_dynamic,
    key_order_change,
)
from ttftscope.doctor.logged_bodies import conversation_pairs
from ttftscope.errors import ConfigError
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer

__all__ = [
    "PrefixDiff",
    "RenderedPrompt",
    "Rendering",
    "diff_prompts",
    "diff_rendered",
    "pair_diffs",
    "render_prompt",
]

Rendering = Literal["chat_template", "canonical_json"]
_PROMPT_FIELDS = ("system", "tools", "functions", "documents", "messages", "prompt")
_NEXT_TURN = {"role": "assistant", "content": "\x00"}  # a continuation's first new text
_CONTEXT = 32  # characters shown on each side of a divergence


@dataclass(frozen=True)
class RenderedPrompt:
    """One body's prompt text, how much of it a continuation keeps, and its tokens.

    >>> r = render_prompt({"prompt": "Hello"})
    >>> r.rendering, r.text, r.reusable
    ('canonical_json', '{"prompt": "Hello"}', 17)
    """

    rendering: Rendering
    text: str
    reusable: int  # characters of ``text`` a continuation of the conversation starts with
    tools: object = None
    ids: tuple[int, ...] | None = None
    reusable_tokens: int | None = None


def _canonical(body: Mapping[str, object]) -> str:
    fields = {k: body[k] for k in _PROMPT_FIELDS if k in body}
    return json.dumps(fields, ensure_ascii=False, default=str)


def _continued(body: Mapping[str, object]) -> dict[str, object]:
    """``body`` with one more turn (a chat) or one more character (a completions prompt)."""
    messages, prompt = body.get("messages"), body.get("prompt")
    if isinstance(messages, list):
        return {**body, "messages": [*messages, _NEXT_TURN]}
    if isinstance(prompt, str):
        return {**body, "prompt": prompt + "\x00"}
    if isinstance(prompt, list):  # token ids: one more (impossible) id continues them
        return {**body, "prompt": [*prompt, -1]}
    raise ConfigError(
        "the request body has neither a 'messages' list nor a 'prompt' string",
        hint="give an OpenAI chat or completions request body",
    )


def _chat_text(renderer: ChatRenderer, body: Mapping[str, object], *, last: bool) -> str:
    messages = body.get("messages")
    kwargs = body.get("chat_template_kwargs")
    extra = {str(k): v for k, v in kwargs.items()} if isinstance(kwargs, Mapping) else {}
    tools, documents = body.get("tools"), body.get("documents")
    return renderer.render(
        messages if isinstance(messages, list) else [],
        add_generation_prompt=last,
        tools=tools if isinstance(tools, list) and tools else None,
        documents=documents if isinstance(documents, list) else None,
        **extra,
    )


def _rendered_text(body: Mapping[str, object], tokenizer: Tokenizer | None) -> tuple[str, int]:
    """The prompt and its reusable length (see the module docstring)."""
    longer = _continued(body)
    prompt = body.get("prompt")
    if tokenizer is None:
        text = _canonical(body)
        return text, common_prefix(text, _canonical(longer))
    if isinstance(prompt, str) and not isinstance(body.get("messages"), list):
        return prompt, len(prompt)
    if isinstance(prompt, list) and not isinstance(body.get("messages"), list):
        text = tokenizer.decode([int(t) for t in prompt])  # the text the client's ids spell
        return text, len(text)
    renderer = ChatRenderer(tokenizer)
    text = _chat_text(renderer, body, last=True)
    return text, common_prefix(text, _chat_text(renderer, longer, last=False))


def render_prompt(body: Mapping[str, object], tokenizer: Tokenizer | None = None) -> RenderedPrompt:
    """Render ``body`` (chat template with ``tokenizer``, canonical JSON without) and encode it.

    >>> render_prompt({"messages": [{"role": "user", "content": "hi"}]}).text
    '{"messages": [{"role": "user", "content": "hi"}]}'
    """
    text, reusable = _rendered_text(body, tokenizer)
    tools = body.get("tools")
    if tokenizer is None:
        return RenderedPrompt("canonical_json", text, reusable, tools)
    ids, offsets = tokenizer.encode_with_offsets(text)
    keep = sum(1 for _, end in offsets if end <= reusable)
    return RenderedPrompt("chat_template", text, reusable, tools, tuple(ids), keep)


@dataclass(frozen=True)
class PrefixDiff:
    """Where B's prompt stops sharing A's, what changed there, and what that costs.

    ``diverge_char`` is None when B starts with all of A's reusable part (nothing lost).
    ``context_a`` / ``context_b`` start at ``context_char``; ``mark_a`` / ``mark_b`` are the
    differing span inside each.

    >>> d = diff_prompts({"prompt": "t=1700000000 go"}, {"prompt": "t=1700000042 go"})
    >>> d.diverge_char, d.dynamic[0].kind, d.lost_chars(), d.lost_tokens()
    (22, 'timestamp', 5, None)
    """

    rendering: Rendering
    chars_a: int
    chars_b: int
    diverge_char: int | None
    tokens_a: int | None
    tokens_b: int | None
    shared_tokens: int | None
    context_a: str
    context_b: str
    dynamic: tuple[DynamicValue, ...]
    reusable_chars: int = 0
    shared_chars: int = 0
    reusable_tokens: int | None = None
    context_char: int = 0
    mark_a: tuple[int, int] = (0, 0)
    mark_b: tuple[int, int] = (0, 0)

    def lost_chars(self) -> int:
        """Characters of A's reusable prompt that B does not share.

        >>> diff_prompts({"prompt": "ab"}, {"prompt": "abc"}).lost_chars()
        0
        """
        return max(0, self.reusable_chars - self.shared_chars)

    def lost_tokens(self) -> int | None:
        """Tokens B could have reused from A but does not (None without a tokenizer).

        >>> diff_prompts({"prompt": "a"}, {"prompt": "b"}).lost_tokens() is None
        True
        """
        if self.reusable_tokens is None or self.shared_tokens is None:
            return None
        return max(0, self.reusable_tokens - self.shared_tokens)

    def blocks_lost(self, block_size: int) -> int | None:
        """Full KV blocks of ``block_size`` tokens reusable but not reused (None: no tokens).

        >>> PrefixDiff("chat_template", 0, 0, 0, 40, 40, 5, "", "", (),
        ...            reusable_tokens=40).blocks_lost(16)
        2
        """
        if self.reusable_tokens is None or self.shared_tokens is None:
            return None
        return max(0, self.reusable_tokens // block_size - self.shared_tokens // block_size)

    def hit_rate_cost(self, block_size: int) -> float | None:
        """The share of B's prompt tokens that would have hit the cache minus the share that does.

        >>> PrefixDiff("chat_template", 0, 0, 0, 40, 64, 5, "", "", (),
        ...            reusable_tokens=40).hit_rate_cost(16)
        0.5
        """
        lost = self.blocks_lost(block_size)
        if lost is None or not self.tokens_b:
            return None if lost is None else 0.0
        return lost * block_size / self.tokens_b


def _marks(a: str, b: str, at: int, dynamic: tuple[DynamicValue, ...]) -> tuple[int, int, int]:
    """The ends of the differing span in A and B (the first value found, else one char)."""
    if dynamic and dynamic[0].kind != "json_key_order":
        first = dynamic[0]
        return first.char, first.char + len(first.before), first.char + len(first.after)
    return at, min(at + 1, len(a)), min(at + 1, len(b))


def _dynamic(ra: RenderedPrompt, rb: RenderedPrompt, at: int) -> tuple[DynamicValue, ...]:
    found = find_dynamic(ra.text, rb.text, at, until=ra.reusable)
    order = key_order_change(ra.tools, rb.tools)
    if order is None:
        return tuple(found)
    keys = DynamicValue("json_key_order", order[0], order[1], at)
    # a reordered key looks like an unnamed difference in the text: name it instead
    rest = found[1:] if found and found[0].kind == "other" else found
    return (keys, *rest)


def diff_rendered(ra: RenderedPrompt, rb: RenderedPrompt) -> PrefixDiff:
    """Compare two rendered prompts (render each once with :func:`render_prompt`).

    >>> diff_rendered(render_prompt({"prompt": "ab"}), render_prompt({"prompt": "ab"})).diverge_char
    """
    shared = common_prefix(ra.text, rb.text)
    reusable = min(ra.reusable, len(rb.text))
    diverge = shared if shared < reusable else None
    dynamic = () if diverge is None else _dynamic(ra, rb, shared)
    start = max(0, shared - _CONTEXT)
    first, end_a, end_b = _marks(ra.text, rb.text, shared, dynamic)
    start = min(start, first)
    shared_tokens = reusable_tokens = None
    if ra.ids is not None and rb.ids is not None and ra.reusable_tokens is not None:
        shared_tokens = common_prefix(ra.ids, rb.ids)
        reusable_tokens = min(ra.reusable_tokens, len(rb.ids))
    return PrefixDiff(
        rendering=ra.rendering,
        chars_a=len(ra.text),
        chars_b=len(rb.text),
        diverge_char=diverge,
        tokens_a=None if ra.ids is None else len(ra.ids),
        tokens_b=None if rb.ids is None else len(rb.ids),
        shared_tokens=shared_tokens,
        context_a=ra.text[start : max(end_a, shared) + _CONTEXT],
        context_b=rb.text[start : max(end_b, shared) + _CONTEXT],
        dynamic=dynamic,
        reusable_chars=reusable,
        shared_chars=shared,
        reusable_tokens=reusable_tokens,
        context_char=start,
        mark_a=(first - start, end_a - start),
        mark_b=(first - start, end_b - start),
    )


def diff_prompts(
    a: Mapping[str, object], b: Mapping[str, object], *, tokenizer: Tokenizer | None = None
) -> PrefixDiff:
    """Render request bodies A and B and say how much of A's prompt B fails to reuse, and why.

    >>> sys = lambda t: {"role": "system", "content": f"Now: {t}. Be brief."}
    >>> a = {"messages": [sys("2026-12-01T10:00:00Z"), {"role": "user", "content": "hi"}]}
    >>> b = {"messages": [sys("2026-12-01T10:05:00Z"), {"role": "user", "content": "hi"}]}
    >>> d = diff_prompts(a, b)
    >>> d.diverge_char, [(v.kind, v.before, v.after) for v in d.dynamic]
    (65, [('timestamp', '2026-12-01T10:00:00Z', '2026-12-01T10:05:00Z')])
    """
    return diff_rendered(render_prompt(a, tokenizer), render_prompt(b, tokenizer))


def pair_diffs(
    bodies: Sequence[Mapping[str, object]], tokenizer: Tokenizer | None = None
) -> Iterator[tuple[tuple[int, int], PrefixDiff]]:
    """Each conversation pair of a log, diffed, in log order; every body rendered once.

    A body is B of one pair and A of the next, so its rendering (and encode) is kept; the
    pairs come lazily, so a caller that wants only the first early divergence stops there.

    >>> [(p, d.diverge_char) for p, d in pair_diffs([{"prompt": "ab"}, {"prompt": "abc"}])]
    [((0, 1), None)]
    """
    rendered: dict[int, RenderedPrompt] = {}
    for pair in conversation_pairs(bodies):
        for i in pair:
            if i not in rendered:
                rendered[i] = render_prompt(bodies[i], tokenizer)
        yield pair, diff_rendered(rendered[pair[0]], rendered[pair[1]])
