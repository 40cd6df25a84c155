"""The synthetic agent context is deterministic and sized by the given counter."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.agenttext import agent_turn, build_context, context_blocks


def test_same_seed_same_text_and_realistic_shapes() -> None:
    a, b = context_blocks(3), context_blocks(3)
    text = "".join(next(a) for _ in range(60))
    assert text == "".join(next(b) for _ in range(60))
    assert "\t" in text and "@@ " in text and "$ pytest" in text
    assert any(ord(c) > 127 for c in text)


def test_turns_differ_and_have_the_asked_size() -> None:
    turns = {agent_turn(i) for i in range(20)}
    assert len(turns) == 20
    assert all(len(t) == 1400 for t in turns)


@settings(max_examples=30, deadline=None)
@given(target=st.integers(min_value=1, max_value=20000), per=st.integers(min_value=2, max_value=6))
def test_context_lands_near_the_target(target: int, per: int) -> None:
    def count(s: str) -> int:
        return len(s) // per

    ctx = build_context(target, count)
    # within 2% or one block of the target
    assert abs(count(ctx) - target) <= max(target * 0.02, 400 // per + 60)
