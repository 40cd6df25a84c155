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
from pathlib import Path

import pytest
import tokenizers

from tests.tokenization.exact import Exact
from tests.tokenizer_fixtures.fixtures import mixed_text
from ttftscope.tokenization.incremental import IncrementalEncoder


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
