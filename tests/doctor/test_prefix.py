"""diff_prompts: rendering, the first divergence, what changed and what it costs.

The tokenizer is the tiny model's (real cl100k vocabulary, ChatML with Hermes tools), built
before the tests by ``ttftscope local-server install`` (scripts/test.sh).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttftscope.doctor.prefix import PrefixDiff, diff_prompts, render_prompt
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

Message = dict[str, object]
_TOOLS: list[dict[str, object]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> Tokenizer:
    return load_tokenizer(tiny_dir)


def _system(now: str) -> Message:
    rules = " ".join(f"Rule {i}: answer briefly and cite sources." for i in range(30))
    return {"role": "system", "content": f"You are helpful. Current time: {now}.\n{rules}"}


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


def _turn(now: str, *extra: Message) -> dict[str, object]:
    return {"model": "m", "tools": _TOOLS, "messages": [_system(now), _user("hi"), *extra]}


MORE: tuple[Message, ...] = ({"role": "assistant", "content": "Hello!"}, _user("and tomorrow?"))


@pytest.mark.parametrize("with_tokenizer", [False, True])
def test_a_continued_conversation_loses_nothing(tiny: Tokenizer, with_tokenizer: bool) -> None:
    tok = tiny if with_tokenizer else None
    diff = diff_prompts(_turn("10:00"), _turn("10:00", *MORE), tokenizer=tok)
    assert diff.diverge_char is None
    assert diff.dynamic == ()
    assert diff.lost_chars() == 0
    assert diff.rendering == ("chat_template" if with_tokenizer else "canonical_json")
    if with_tokenizer:
        assert diff.lost_tokens() == 0 and diff.blocks_lost(16) == 0
        assert diff.reusable_tokens == diff.tokens_a  # all of A, generation prompt included


def test_a_timestamp_in_the_system_prompt_is_named_and_costed(tiny: Tokenizer) -> None:
    a, b = _turn("2026-12-01T10:00:00Z"), _turn("2026-12-01T10:05:13Z", *MORE)
    diff = diff_prompts(a, b, tokenizer=tiny)
    text = render_prompt(a, tiny).text
    assert diff.diverge_char is not None
    assert text[: diff.diverge_char].endswith("Current time: 2026-12-01T10:0")
    assert [(v.kind, v.before, v.after) for v in diff.dynamic] == [
        ("timestamp", "2026-12-01T10:00:00Z", "2026-12-01T10:05:13Z")
    ]
    assert diff.dynamic[0].char == text.index("2026-12-01")
    assert diff.tokens_a is not None and diff.shared_tokens is not None
    assert diff.shared_tokens < 100 < diff.tokens_a
    assert diff.lost_tokens() == diff.tokens_a - diff.shared_tokens
    assert diff.blocks_lost(16) == diff.tokens_a // 16 - diff.shared_tokens // 16
    cost = diff.hit_rate_cost(16)
    assert cost is not None and 0.5 < cost < 1
    shown_a = diff.context_a[diff.mark_a[0] : diff.mark_a[1]]
    shown_b = diff.context_b[diff.mark_b[0] : diff.mark_b[1]]
    assert (shown_a, shown_b) == ("2026-12-01T10:00:00Z", "2026-12-01T10:05:13Z")


def test_without_a_tokenizer_the_loss_is_in_characters() -> None:
    diff = diff_prompts(_turn("2026-12-01"), _turn("2026-12-02", *MORE))
    assert diff.rendering == "canonical_json"
    assert [v.kind for v in diff.dynamic] == ["date"]
    assert diff.lost_chars() > 1000
    assert diff.lost_tokens() is None and diff.blocks_lost(16) is None
    assert diff.hit_rate_cost(16) is None


def test_sampling_parameters_do_not_reach_the_prompt() -> None:
    a = {**_turn("x"), "temperature": 0.1, "stream": True, "seed": 1}
    b = {**_turn("x", *MORE), "temperature": 0.9, "max_tokens": 5}
    assert diff_prompts(a, b).diverge_char is None


@pytest.mark.parametrize("with_tokenizer", [False, True])
def test_reordered_tool_keys_are_named(tiny: Tokenizer, with_tokenizer: bool) -> None:
    a, b = _turn("x"), _turn("x", *MORE)
    fn = _TOOLS[0]["function"]
    assert isinstance(fn, dict)
    b["tools"] = [{"type": "function", "function": dict(reversed(list(fn.items())))}]
    diff = diff_prompts(a, b, tokenizer=tiny if with_tokenizer else None)
    assert diff.diverge_char is not None and diff.lost_chars() > 0
    assert diff.dynamic[0].kind == "json_key_order"
    assert diff.dynamic[0].before == "tools[0].function: name, description, parameters"


def test_an_edited_earlier_turn_is_a_loss_with_nothing_named(tiny: Tokenizer) -> None:
    a = _turn("x", {"role": "assistant", "content": "Sunny, 20 degrees."}, _user("ok"))
    b = _turn("x", {"role": "assistant", "content": "It is raining."}, _user("ok"), *MORE)
    diff = diff_prompts(a, b, tokenizer=tiny)
    assert diff.diverge_char is not None
    assert [v.kind for v in diff.dynamic] == ["other"]
    assert (diff.lost_tokens() or 0) > 0


def test_completions_prompts_are_used_as_they_are(tiny: Tokenizer) -> None:
    diff = diff_prompts({"prompt": "id=7 go on"}, {"prompt": "id=8 go on and on"}, tokenizer=tiny)
    assert (diff.rendering, diff.diverge_char, diff.chars_a) == ("chat_template", 3, 10)
    assert [(v.kind, v.before, v.after) for v in diff.dynamic] == [("counter", "7", "8")]


def _diff(reusable: int, shared: int, tokens_b: int) -> PrefixDiff:
    return PrefixDiff(
        "chat_template", 0, 0, 0, reusable, tokens_b, shared, "", "", (), reusable_tokens=reusable
    )


@pytest.mark.parametrize(
    ("reusable", "shared", "tokens_b", "blocks", "cost"),
    [
        (100, 100, 120, 0, 0.0),
        (100, 15, 120, 6, 96 / 120),  # floor(100/16) - floor(15/16)
        (100, 16, 120, 5, 80 / 120),
        (15, 3, 20, 0, 0.0),  # less than one full block could ever be reused
        (100, 0, 0, 6, 0.0),  # an empty B has no hit rate to lose
    ],
)
def test_blocks_count_full_kv_blocks_only(
    reusable: int, shared: int, tokens_b: int, blocks: int, cost: float
) -> None:
    diff = _diff(reusable, shared, tokens_b)
    assert diff.lost_tokens() == max(0, reusable - shared)
    assert diff.blocks_lost(16) == blocks
    assert diff.hit_rate_cost(16) == pytest.approx(cost)


texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)


@given(texts, st.text(min_size=1, max_size=100))
def test_a_prompt_and_its_extension_never_diverge(x: str, suffix: str) -> None:
    diff = diff_prompts({"prompt": x}, {"prompt": x + suffix})
    assert diff.diverge_char is None and diff.lost_chars() == 0


words = st.text("abc xyz.,!?\n", max_size=40)


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40, deadline=None
)
@given(st.lists(words, min_size=1, max_size=5), words, words)
def test_a_chat_and_its_next_turn_never_diverge(
    tiny: Tokenizer, contents: list[str], answer: str, follow: str
) -> None:
    roles = ["user", "assistant"]
    messages: list[Message] = [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]
    if messages[-1]["role"] == "assistant":
        messages.append(_user("?"))
    more = [*messages, {"role": "assistant", "content": answer}, _user(follow)]
    diff = diff_prompts({"messages": messages}, {"messages": more}, tokenizer=tiny)
    assert diff.diverge_char is None
    # the text is all shared; A's last token ("\n") may merge with the answer's first
    # characters ("\n\n") in B: one token, as vLLM would count it
    assert (diff.lost_tokens() or 0) <= 1


moments = st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1), timezones=st.just(UTC))


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60, deadline=None
)
@given(words, words, moments, moments)
def test_a_timestamp_inserted_at_p_diverges_by_p_and_is_named(
    tiny: Tokenizer, head: str, tail: str, t1: datetime, t2: datetime
) -> None:
    s1, s2 = (t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in (t1, t2))
    if s1 == s2:
        return
    p = len(head) + 1
    a = {"prompt": f"{head} {s1} {tail}"}
    b = {"prompt": f"{head} {s2} {tail}"}
    diff = diff_prompts(a, b, tokenizer=tiny)
    assert diff.diverge_char is not None and p <= diff.diverge_char < p + len(s1)
    assert diff.dynamic[0].kind == "timestamp" and diff.dynamic[0].char == p
