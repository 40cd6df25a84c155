"""The proven regex cut's read horizon: why it stops two characters before the last run.

``cuts._regex_cut`` keeps the pieces before the one holding character ``q - 2`` (``q``: where
the cached text's last coarse-class run starts). A match may read past its own end: o200k's
words take a contraction (``(?i:'s|'t|'re|'ve|'m|'ll|'d)?``), so ``" abc"`` before a trailing
``"'"`` was decided by the character after that quote, which an append supplies. With the
horizon at ``q`` the cut keeps ``" abc"``, the piece-before check sees ``" abc's"`` and gives
up, and every such append falls back to a full encode. The ids stay right either way (which is
why random appends never showed a wrong id); the path does not. The margin only binds when no
long added token pushes the cut further back, hence the tokenizer without added tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import tokenizers

from tests.tokenization.exact import Exact
from tests.tokenizer_fixtures.fixtures import mixed_text
from ttftscope.tokenization import fastpath
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.offsets import convert


@pytest.fixture(scope="module")
def o200k_without_added(tokenizer_paths: dict[str, Path]) -> tokenizers.Tokenizer:
    doc = json.loads((tokenizer_paths["o200k"] / "tokenizer.json").read_text())
    doc["added_tokens"] = []  # the cut's added-token margin is then one character
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


@pytest.mark.parametrize(
    ("tail", "more"), [(" abc'", "s"), (" don'", "t"), (" we'", "ll"), ("x = a'", "re")]
)
def test_an_append_that_completes_a_contraction_is_spliced(
    o200k_without_added: tokenizers.Tokenizer, tail: str, more: str
) -> None:
    tok = o200k_without_added
    old = mixed_text(600, seed=1) + tail
    assert tok.encode(old + more).tokens[-1] != tok.encode(old).tokens[-1]  # a seam it crosses
    check = Exact(IncrementalEncoder(tok), tok)
    check(old)
    check(old + more)  # same ids as a full encode, by the append path, no fallback
    assert check.paths == ["full", "append"]


def _hf_then_ascii(tail: str, more: str) -> str:
    """An HF-encoded stretch (non-ASCII) joined to the ASCII run after it right before the
    run's ``_MIN_ASCII + 1``-th character: here, between the quote and its contraction."""
    return "日本語" + "x" * (fastpath._MIN_ASCII - len(tail)) + tail + more + " and more"


def _ascii_then_hf(tail: str, more: str) -> str:
    """An ASCII stretch joined to the non-ASCII text after it one character early (a letter
    may compose with a following mark): here, too, between the quote and its contraction."""
    return "x" * fastpath._MIN_ASCII + tail + more[0] + "日本語" + more[1:] + " and more"


@pytest.mark.parametrize("layout", [_hf_then_ascii, _ascii_then_hf])
@pytest.mark.parametrize(("tail", "more"), [(" abc'", "s"), (" don'", "t"), (" we'", "ll")])
def test_the_fast_window_keeps_the_same_margin_where_its_stretches_join(
    o200k_without_added: tokenizers.Tokenizer,
    layout: Callable[[str, str], str],
    tail: str,
    more: str,
) -> None:
    """The fast window encoder (``fastpath``) joins the stretches it encodes apart (ASCII in
    Python, the rest by HF) with the same read horizon as the cut: the pieces before the one
    holding ``q - 2``. Placed where a join falls between a quote and the contraction it opens,
    a horizon at ``q`` would emit ``" abc"`` as a piece of its own and start ``"'s"`` another,
    where HF's encode of the window (the reference) reads ``" abc's"`` as one."""
    encoder = IncrementalEncoder(o200k_without_added)
    engines = encoder._eng
    assert engines.fast is not None
    window = layout(tail, more)
    got = engines.fast.encode(window, 0)
    assert got is not None
    enc = o200k_without_added.encode(window, add_special_tokens=False)
    want_ids, want_ends = convert(engines, encoder._table, enc, 0, window)
    assert (got[0], list(got[1])) == (want_ids, list(want_ends))
