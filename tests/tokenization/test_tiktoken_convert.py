"""tiktoken rank files → tokenizers: identical ids to tiktoken, on synthetic and real ranks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import cache
from itertools import pairwise

import tiktoken
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tokenizer_fixtures import fixture_build as fb
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tokenization.tiktoken_convert import (
    adapt_pattern,
    bytes_to_unicode,
    known_encodings,
    ranks_to_tokenizer,
)

PAT = known_encodings()["cl100k_base"].pat_str
CORPUS = (
    "the quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs! "
    "123 4567 there then these those 12 the the the\n\n  indented\r\nline\n"
    "1234567890 12345678 1234567 00000000 it's THE'S they'LL\n\n\n   \r\n\t\tthe\n"
) * 3


def train_ranks(corpus: str, n_merges: int) -> dict[bytes, int]:
    """A tiny byte-level BPE trained greedily on ``corpus``: every token is a real merge.

    Trained across pre-token boundaries on purpose (merges like "7 8" or "e\n"), so a wrong
    split pattern changes ids instead of hiding behind byte-level fallbacks.
    """
    ranks = {bytes([b]): b for b in range(256)}
    words = [[bytes([b]) for b in w.encode()] for w in corpus.splitlines(keepends=True)]
    for _ in range(n_merges):
        pairs = Counter((a, b) for w in words for a, b in pairwise(w))
        if not pairs:
            break
        (a, b), _count = pairs.most_common(1)[0]
        ranks[a + b] = len(ranks)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i : i + 2] = [a + b]
                i += 1
    return ranks


@cache
def synthetic() -> tuple[tiktoken.Encoding, tokenizers.Tokenizer]:
    ranks = train_ranks(CORPUS, 150)
    specials = {"<|end|>": len(ranks) + 5}
    enc = tiktoken.Encoding("tiny", pat_str=PAT, mergeable_ranks=ranks, special_tokens=specials)
    return enc, ranks_to_tokenizer(ranks, PAT, specials)


TEXT = st.lists(
    st.sampled_from(
        [
            *"the quick fox dog THE 0123456789 \n\r\t'.,;!é日🤗",
            "<|end|>",
            "the ",
            "'s",
            "'LL",
            "1234567",
            "\r\n",
            "  ",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_synthetic_ranking_encodes_like_tiktoken(text: str) -> None:
    enc, hf = synthetic()
    assert hf.encode(text).ids == enc.encode(text, allowed_special="all")


def test_whole_piece_shortcut_matches_tiktoken() -> None:
    # "abcd" is in the vocabulary but merging "bc" first strands it; tiktoken returns a piece
    # that is itself a token whole, so the HF model must have ignore_merges on.
    ranks = {bytes([b]): b for b in range(256)} | {b"bc": 256, b"ab": 257, b"cd": 258, b"abcd": 259}
    enc = tiktoken.Encoding("t", pat_str=r"\w+|\s+", mergeable_ranks=ranks, special_tokens={})
    hf = ranks_to_tokenizer(ranks, r"\w+|\s+", {})
    for text in ("abcd", "abcd abc", "xabcd", "bcd ab"):
        assert hf.encode(text).ids == enc.encode_ordinary(text)
    assert hf.encode("abcd").ids == [259]


def test_special_ids_and_offset_are_kept() -> None:
    ranks = {bytes([b]): b for b in range(256)}
    hf = ranks_to_tokenizer(ranks, r"\S+|\s+", {"<a>": 0, "<z>": 900}, id_offset=10)
    assert hf.encode("<a>A<z>").ids == [0, 65 + 10, 900]
    assert hf.decode([0, 75, 900], skip_special_tokens=False) == "<a>A<z>"


def test_possessive_interval_is_rewritten_because_onig_reads_it_as_a_repeat() -> None:
    raw = known_encodings()["cl100k_base"].pat_str
    assert r"\p{N}{1,3}+" in raw

    def split(p: str) -> list[str]:
        return [
            s
            for s, _ in tokenizers.pre_tokenizers.Split(
                tokenizers.Regex(p), behavior="isolated"
            ).pre_tokenize_str("1234567")
        ]

    assert split(raw) == ["1234567"]  # the trap: any run of digits in one piece
    assert split(adapt_pattern(raw)) == ["123", "456", "7"]
    assert adapt_pattern(r"a++b*+c?+\{1,2}+") == r"a++b*+c?+\{1,2}+"


def test_byte_table_is_a_bijection() -> None:
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256 and table[ord(" ")] == "Ġ"


def test_known_encodings_read_offline() -> None:
    specs = known_encodings()
    o200k = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    assert specs["o200k_base"].special_tokens == o200k
    assert specs["cl100k_base"].expected_hash is not None


@cache
def cl100k_reference() -> Callable[[str], list[int]]:
    return fb.tiktoken_reference("cl100k")[0]


REAL_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" \n\r\t'0123456789.,;:!?()[]{}<>/\\\"-_=+*&^%$#@~`|")),
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
    ),
    max_size=120,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=REAL_TEXT)
def test_cl100k_random_text_matches_tiktoken(
    text: str, load_family: Callable[[str], Tokenizer]
) -> None:
    assert load_family("cl100k").encode(text) == cl100k_reference()(text)
