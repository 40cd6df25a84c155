"""SentencePiece windows split into chunks only where no merge can join the two sides."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.tokenization import spacewindow as sw
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.window_engines import engines_for

MARK = "\u2581"
CLASS_CHARS = [MARK, "aZ", "07", "(,_", "\n\t", "é日😀"]  # one entry per class, "other" last
RELATIONS = st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)))
TEXTS = st.text(alphabet="".join(CLASS_CHARS), max_size=40)


def _class(ch: str) -> int:
    return next(i for i, chars in enumerate(CLASS_CHARS) if ch in chars)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(joinable=RELATIONS, text=TEXTS)
def test_chunks_cut_only_between_classes_nothing_joins(
    joinable: set[tuple[int, int]], text: str
) -> None:
    assert [sw._class_of(c) for c in "".join(CLASS_CHARS)] == [
        _class(c) for c in "".join(CLASS_CHARS)
    ]
    chunks = sw.chunk_regex(joinable).findall(text)
    assert "".join(chunks) == text
    for left, right in pairwise(chunks):
        assert (_class(left[-1]), _class(right[0])) not in joinable
    # a run of one self-joinable class is never cut
    for left, right in pairwise(chunks):
        c = _class(left[-1])
        assert not (c == _class(right[0]) and (c, c) in joinable)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(lone=st.text(alphabet="aZ07(,_\n\t", max_size=6), text=TEXTS)
def test_words_cut_only_before_marks_and_around_lone_characters(lone: str, text: str) -> None:
    words = sw.word_regex(lone).findall(text)
    assert "".join(words) == text
    for left, right in pairwise(words):
        a, b = left[-1], right[0]
        assert (b == MARK and a != MARK) or a in lone or b in lone
    # a lone character is a word of its own
    assert all(len(w) == 1 for w in words if set(w) & set(lone))


def test_lone_characters_are_those_no_merge_result_holds() -> None:
    pairs = sw.merge_pairs({"merges": ["a (", "\n b"]})
    assert pairs is not None
    lone = sw.lone_characters(pairs)
    assert not set("a(\nb") & set(lone)
    assert "1" in lone and "\t" in lone and len(lone) == 124


def _sentencepiece(
    merges: list[tuple[str, str]],
    *,
    byte_fallback: bool = True,
    fuse_unk: bool = True,
    missing_bytes: str = "",
    added: tuple[dict[str, object], ...] = (),
    normalizer: Any = None,
    **model: object,
) -> tokenizers.Tokenizer:
    """A Llama-2-style tokenizer (Prepend + Replace, no pre-tokenizer) over a tiny alphabet."""
    alphabet = [MARK, *"abcxyz()_,.0123456789\n"]
    vocab = {"<unk>": 0}
    for b in range(256) if byte_fallback else ():
        if chr(b) not in missing_bytes:
            vocab[f"<0x{b:02X}>"] = len(vocab)
    for token in alphabet + [a + b for a, b in merges]:
        vocab.setdefault(token, len(vocab))
    doc: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": len(vocab) + i,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
                **t,
            }
            for i, t in enumerate(added)
        ],
        "normalizer": normalizer
        or {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": MARK},
                {"type": "Replace", "pattern": {"String": " "}, "content": MARK},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": fuse_unk,
            "byte_fallback": byte_fallback,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(m) for m in merges],
            **model,
        },
    }
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


# merges that join letters to "(", "(" to digits and digits to digits: cuts there are unsafe
CROSSING = [
    ("a", "("),
    ("(", "1"),
    ("1", "2"),
    ("12", "3"),
    (MARK, "a"),
    (MARK + "a", "b"),
    ("c", "\n"),
    ("x", "_"),
    ("_", "y"),
    ("a(", "1"),
]
SNIPPETS = st.lists(
    st.sampled_from(
        [
            "a(",
            "a(1",
            "(12",
            "123",
            " ab",
            "  a",
            "c\n",
            "x_y",
            "é",
            "日本",
            "😀",
            " ",
            "\n\n",
            "z",
            "b.",
            "9",
            "0",
            ",",
            "x_",
            "_y",
        ]
    ),
    max_size=20,
).map("".join)


@pytest.mark.parametrize(
    ("byte_fallback", "fuse_unk"), [(True, True), (False, True), (False, False)]
)
def test_windows_match_hf_when_merges_cross_classes(byte_fallback: bool, fuse_unk: bool) -> None:
    hf = _sentencepiece(CROSSING, byte_fallback=byte_fallback, fuse_unk=fuse_unk)
    eng = engines_for(hf)
    assert eng.plan.mode == "space" and eng.space is not None
    assert (eng.space._chunks is None) == (fuse_unk and not byte_fallback)

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(head=SNIPPETS, tail=SNIPPETS)
    def run(head: str, tail: str) -> None:
        window = " " + head + tail
        got = eng.space.encode("pre" + window, 3) if eng.space is not None else None
        want = eng.window.encode(window, add_special_tokens=False)
        assert got is not None
        assert got[0] == want.ids
        assert [e // 2 - 3 for e in got[1]] == [e for _, e in want.offsets]
        enc = IncrementalEncoder(hf)
        enc.encode(head)
        assert enc.encode(head + tail) == hf.encode(head + tail, add_special_tokens=False).ids

    run()


@pytest.mark.parametrize("setting", [{"ignore_merges": True}, {"end_of_word_suffix": "</w>"}])
def test_models_that_treat_a_segment_as_a_word_are_not_split(setting: dict[str, Any]) -> None:
    hf = _sentencepiece(CROSSING, **setting)
    assert engines_for(hf).plan.mode == "verified"
    enc = IncrementalEncoder(hf)
    for text in ("a(12 ab", "a(12 ab c\n x_y", "a(12 ab c\n x_y 123"):
        assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_merges_of_byte_tokens_keep_windows_in_words() -> None:
    model = {"merges": [["<0x41>", "<0x42>"]], "vocab": {}, "byte_fallback": True}
    assert sw.merge_pairs(model) is None
    assert sw.merge_pairs({"merges": ["a b", "<unk> c"], "unk_token": "<unk>"}) is None
    assert sw.merge_pairs({"merges": ["a b c"]}) is None
    assert sw.merge_pairs({"merges": [["a", ""]]}) is None
    pairs = sw.merge_pairs({"merges": ["a (", "1 x"]})
    assert pairs is not None and sw.joinable_classes(pairs) == {(1, 3), (2, 1)}


def test_word_regex_splits_digits_and_line_feeds_in_real_sentencepiece(load_family: Any) -> None:
    space = engines_for(load_family("llama2")).space
    assert space is not None
    words = space._words(f"{MARK}n=4058):\n{MARK}x")
    assert words == [f"{MARK}n=", "4", "0", "5", "8", "):", "\n", f"{MARK}x"]


def _exact_on_appends(hf: tokenizers.Tokenizer, pieces: list[str]) -> None:
    enc, text = IncrementalEncoder(hf), ""
    for piece in pieces:
        text += piece
        assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids, repr(text)


def test_unknown_characters_held_back_by_hf_keep_windows_in_words() -> None:
    """HF emits a later character's byte tokens before a held-back <unk> ("$" has none)."""
    hf = _sentencepiece(CROSSING, fuse_unk=False, missing_bytes="$")
    eng = engines_for(hf)
    assert eng.space is not None and eng.space._chunks is None
    _exact_on_appends(hf, ["ab ab ab", " a$é", "$1é2", " x_$日", "$$é(1"])


def test_normalized_added_tokens_are_not_cut_by_words() -> None:
    replace_only = {"type": "Replace", "pattern": {"String": " "}, "content": MARK}
    hf = _sentencepiece(
        CROSSING, normalizer=replace_only, added=({"content": " a", "normalized": True},)
    )
    assert engines_for(hf).plan.mode == "verified"
    _exact_on_appends(hf, ["xb xb xb xb", MARK + "a", " a(12 b", MARK + MARK + "a"])


def test_added_tokens_the_model_can_also_make_are_exact() -> None:
    hf = _sentencepiece(
        CROSSING,
        added=(
            {"content": "0", "single_word": True},
            {"content": "(", "lstrip": True, "special": True},
        ),
    )
    _exact_on_appends(hf, [" d\x0c 日  x-", "02", " a (b", " 0 x0 (1", "a(1 0"])


def test_a_bpe_without_unknown_token_that_drops_characters_is_exact() -> None:
    hf = _sentencepiece(CROSSING, byte_fallback=False, fuse_unk=False, unk_token=None)
    _exact_on_appends(hf, ["ab é ab", " a(1é", "日 x_y", " 😀c\n"])


def test_model_flags_flipped_on_a_live_tokenizer_are_noticed() -> None:
    hf = _sentencepiece(CROSSING, missing_bytes="$")
    enc = IncrementalEncoder(hf)
    enc.encode("ab ab $é ab")
    hf.model.byte_fallback = False
    text = "ab ab $é ab a$é"
    assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_a_model_replaced_on_a_live_tokenizer_is_noticed() -> None:
    """The new model has the same type and flags and fewer merges: only its size differs."""
    hf = _sentencepiece(CROSSING)
    enc = IncrementalEncoder(hf)
    enc.encode("ab a(12 ab")
    hf.model = _sentencepiece(CROSSING[:3]).model
    text = "ab a(12 ab a(123"
    assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids
