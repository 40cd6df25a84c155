"""The fast window encoders return exactly what an HF encode of the window gives.

Hypothesis examples per family: ``TTFTSCOPE_INCR_EXAMPLES`` (default 100).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tokenizer_fixtures.fixtures import FAMILIES, mixed_text
from ttftscope.tokenization import fastpath as fp
from ttftscope.tokenization import spacewindow as sw
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tokenization.offsets import convert
from ttftscope.tokenization.regex_ascii import translate_ascii
from ttftscope.tokenization.window_engines import engines_for

EXAMPLES = int(os.environ.get("TTFTSCOPE_INCR_EXAMPLES", "100"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=80)
ASCII_ATOMS = st.sampled_from(
    (
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x1f",
        "\x00",
        "'s",
        "'LL",
        "'re",
        "x'd",
        "12",
        "1234567",
        "abc",
        "ABC",
        "Abc",
        "aBC",
        "_",
        "...",
        "/",
        "//",
        "$",
        "\\",
        "zqxjvkw",
        "QZXJ",
        "    1\timport os\n",
        "  \n",
        " \n ",
        "!!",
        "\n\n\n",
    )
)
MIXED_ATOMS = st.sampled_from(
    (
        "é",
        "e\u0301",
        "\u0301",
        "日本語",
        "😀",
        "👍🏽",
        "👨\u200d👩\u200d👧",
        "мир",
        "עברית",
        "\u037e",
        "\u212a",
        "\xa0",
        "\u3000",
        "\u1100\u1161",
        "𠀀",
        "—",
        "ﬁ",
        "½",
    )
)
ASCII_TEXT = st.lists(ASCII_ATOMS | ASCII, max_size=12).map("".join)
MIXED_TEXT = st.lists(ASCII_ATOMS | MIXED_ATOMS | ASCII, max_size=14).map("".join)
REGEX_FAMILIES = ["o200k", "cl100k", "gpt2", "tekken", "llama3", "qwen2"]
SPACE_FAMILIES = ["llama2", "mistral_v1", "mistral_v3"]


@pytest.mark.parametrize("family", FAMILIES)
def test_fast_encoders_follow_the_plan(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    eng = engines_for(load_family(family))
    assert (eng.fast is not None) == (family in REGEX_FAMILIES) == (eng.plan.mode == "regex")
    assert (eng.space is not None) == (family in SPACE_FAMILIES) == (eng.plan.mode == "space")


@pytest.mark.parametrize("family", REGEX_FAMILIES)
def test_translated_regex_splits_ascii_like_hf(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    hf = load_family(family).hf
    fast = engines_for(load_family(family)).fast
    assert fast is not None and hf.pre_tokenizer is not None

    @SETTINGS
    @given(text=ASCII_TEXT)
    def run(text: str) -> None:
        want = [p for p, _ in hf.pre_tokenizer.pre_tokenize_str(text)]
        assert [p.translate(fast._map) for p in fast._rx.findall(text)] == want

    run()


def _want(
    enc: IncrementalEncoder, tk: tokenizers.Tokenizer, text: str
) -> tuple[list[int], list[int]]:
    ids, ends = convert(enc._eng, enc._table, tk.encode(text, add_special_tokens=False), 0, text)
    return ids, list(ends)


def _window_setup(tok: Tokenizer) -> tuple[IncrementalEncoder, Any, Any, tokenizers.Tokenizer]:
    """An encoder, its engines, its fast window encoder and the HF tokenizer that window mirrors."""
    enc = IncrementalEncoder(tok)
    eng = enc._eng
    window = eng.fast or eng.space
    assert window is not None
    return enc, eng, window, eng.full if eng.fast is not None else eng.window


@pytest.mark.parametrize("family", REGEX_FAMILIES + SPACE_FAMILIES)
def test_fast_window_equals_hf_window(family: str, load_family: Callable[[str], Tokenizer]) -> None:
    """Ids and ``2*end+flag`` words, on ASCII, mixed-script and special-token windows."""
    tok = load_family(family)
    enc, eng, window, tk = _window_setup(tok)
    specials = [t.content for t in tok.added_tokens if len(t.content) > 1][:3]
    used = []

    @SETTINGS
    @given(
        text=MIXED_TEXT,
        inserts=st.lists(st.tuples(st.sampled_from(specials), st.integers(0, 60)), max_size=3),
    )
    def run(text: str, inserts: list[tuple[str, int]]) -> None:
        for special, at in inserts:  # ChatML-like windows: "<|im_end|>\n<|im_start|>user"
            at = min(at, len(text))
            text = text[:at] + special + text[at:]
        text = " " + text if eng.space is not None else text
        got = window.encode("prefix" + text, 6)
        if inserts and eng.space is not None:
            assert got is None  # added-token text: HF encodes that window
        if eng.fast is not None:
            assert got is not None
        if got is not None:
            want_ids, want_ends = _want(enc, tk, text)
            assert got[0] == want_ids
            assert [e - 12 for e in got[1]] == want_ends
            used.append(text)

    run()
    assert used


@pytest.mark.parametrize("family", REGEX_FAMILIES + SPACE_FAMILIES)
def test_fast_window_on_long_mixed_text_and_small_cache(
    family: str, load_family: Callable[[str], Tokenizer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long windows with many stretches, and a cache cleared every few calls."""
    monkeypatch.setattr(fp, "_CACHE_CAP", 50)
    monkeypatch.setattr(sw, "_CACHE_CAP", 50)
    monkeypatch.setattr(sw, "_KEY_CAP", 8)
    tok = load_family(family)
    enc, _eng, window, tk = _window_setup(tok)
    for seed in range(4):
        text = " " + mixed_text(3000, seed=seed).replace("<|", "<")
        got = window.encode(text, 0)
        assert got is not None
        assert (got[0], list(got[1])) == _want(enc, tk, text)


def test_incremental_appends_use_the_fast_window(load_family: Callable[[str], Tokenizer]) -> None:
    tok = load_family("qwen2")
    enc = IncrementalEncoder(tok)
    fast = enc._eng.fast
    assert fast is not None
    text = mixed_text(4000, seed=9)
    enc.encode(text)
    fast._cache.clear()
    for piece in (" more words", "\n\tx = 12345 # 日本 é\n", " ok"):
        text += piece
        assert enc.encode(text) == tok.encode(text)
        assert enc.stats.path == "append"
    assert fast._cache


@pytest.mark.parametrize(
    "regex",
    [
        r"\b\w+",
        r"a.b",
        r"^a",
        r"(?<=a)b",
        r"\p{Greek}+",
        r"[\S]",
        r"(?i:\p{L})",
        r"(a|b",
        r"a)",
        r"[a-z]",
        r"\d+",
        r"(?P<x>a)",
    ],
)
def test_translation_refuses_unknown_constructs(regex: str) -> None:
    assert translate_ascii(regex) is None


def test_translation_of_known_constructs() -> None:
    assert translate_ascii(r"\s++$|'(?i:[sdmt]|ll)") == (
        r"[\t\n\x0b\x0c\r ]++(?=\n|\Z)|'(?i:[sdmt]|ll)"
    )
    assert translate_ascii(r"[^\r\n\p{L}\p{N}]?[\p{Lt}\p{Lu}]*") == r"[^\r\nA-Za-z0-9]?[A-Z]*"
    assert translate_ascii(r"\p{Lo}|(x)") == r"(?!)|(?:x)"


def test_added_token_matcher_is_leftmost_longest() -> None:
    rx = re.compile(fp._trie_regex(["ab", "abc", "b", "<|im_start|>", "<|im_end|>"]))
    assert rx.findall("xabcb ab<|im_end|><|im_start|>") == [
        "abc",
        "b",
        "ab",
        "<|im_end|>",
        "<|im_start|>",
    ]
