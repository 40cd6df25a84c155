"""A long cold text is encoded as proven appends (``IncrementalEncoder._stepped``): the ids of
a full encode, and HF never encodes (and hands back offsets for) the whole text at once.

The step is made small here (``STEP_CHARS``) so that a few thousand characters cross many step
boundaries: special tokens, white-space runs and multi-byte characters land on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.tokenizer_fixtures.fixtures import FAMILIES, mixed_text
from ttftscope.tokenization import cuts, incremental, offsets
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer

STEP = 256


def _hf_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lengths of the texts the encoder hands to HF from now on."""
    calls: list[int] = []
    real = offsets.plain

    def plain(tk: Any, text: str) -> Any:
        calls.append(len(text))
        return real(tk, text)

    monkeypatch.setattr(incremental, "plain", plain)  # whole texts and the first step
    monkeypatch.setattr(cuts, "plain", plain)  # the windows after a cut
    monkeypatch.setattr(incremental, "STEP_CHARS", STEP)
    return calls


def _straddled(text: str, pieces: list[str]) -> str:
    """``text`` with each piece inserted across a step boundary (half before, half after)."""
    out, at = text, STEP
    for piece in pieces:
        cut = at - len(piece) // 2
        out = out[:cut] + piece + out[cut:]
        at += 3 * STEP
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_a_long_cold_text_is_encoded_in_steps_with_a_full_encodes_ids(
    family: str, load_family: Callable[[str], Tokenizer], monkeypatch: pytest.MonkeyPatch
) -> None:
    tok = load_family(family)
    calls = _hf_calls(monkeypatch)
    for seed in range(3):
        text = mixed_text(8 * STEP, seed)
        enc = IncrementalEncoder(tok)
        calls.clear()
        assert enc.encode(text) == tok.encode(text)
        stats = enc.stats
        assert stats.path == "full" and stats.last_reused_tokens == 0
        # no call saw the whole text (the fast window engines need none at all)
        assert max(calls, default=0) < len(text) - STEP
        # the state it left serves the next turn as an append
        more = text + "\nuser: and the tests?\n"
        assert enc.encode(more) == tok.encode(more)
        assert enc.stats.path == "append"


@pytest.mark.parametrize("family", FAMILIES)
def test_specials_and_runs_across_step_boundaries_stay_exact(
    family: str, load_family: Callable[[str], Tokenizer], monkeypatch: pytest.MonkeyPatch
) -> None:
    tok = load_family(family)
    calls = _hf_calls(monkeypatch)
    specials = [t.content for t in tok.added_tokens if len(t.content) > 1][:3]
    pieces = [*specials, " " * 40, "\n" * 9, "é" * 7 + "\u0301", "😀" * 5, "1234567890" * 3]
    text = _straddled(mixed_text(len(pieces) * 3 * STEP + STEP, 7), pieces)
    assert IncrementalEncoder(tok).encode(text) == tok.encode(text)
    # and it was the stepped path that was exact: no call saw the whole text
    assert max(calls, default=0) < len(text) - STEP


def test_short_texts_are_encoded_whole(
    load_family: Callable[[str], Tokenizer], monkeypatch: pytest.MonkeyPatch
) -> None:
    tok = load_family("qwen2")
    calls = _hf_calls(monkeypatch)
    text = mixed_text(2 * STEP - 10, 1)[: 2 * STEP - 10]
    assert IncrementalEncoder(tok).encode(text) == tok.encode(text)
    assert calls == [len(text)]
