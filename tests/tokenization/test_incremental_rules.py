"""Cut rules follow the declared components; unknown components take the verified path."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from tests.tokenization.exact import Exact
from tests.tokenizer_fixtures.fixtures import mixed_text
from ttftscope.tokenization.boundary import analyse, regex_is_local
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.textscan import (
    char_class,
    common_prefix_len,
    last_run_start,
    word_start,
)

O200K_LIKE = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


def _doc(pre: Any = None, norm: Any = None, added: Any = ()) -> dict[str, Any]:
    return {
        "normalizer": norm,
        "pre_tokenizer": pre,
        "added_tokens": list(added),
        "model": {"type": "BPE", "vocab": {}, "merges": []},
    }


def _split(regex: str) -> dict[str, Any]:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


@pytest.mark.parametrize(
    ("regex", "local"),
    [
        (O200K_LIKE, True),
        (r"\s++$|\s+(?!\S)|\s", True),
        (r"(?<=a)b", False),
        (r"\bword", False),
        (r"^\s+", False),
        (r".+", False),
        (r"\w+", False),
        (r"[^\s]+", False),
        (r"(?=ab)a", False),
        (r"\S+", False),
        (r"(a)\1", False),
        (r"\p{P}+", False),
    ],
)
def test_regex_locality_check(regex: str, local: bool) -> None:
    assert regex_is_local(regex) is local


def test_modes_follow_components() -> None:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}
    seq = {"type": "Sequence", "pretokenizers": [_split(O200K_LIKE), byte_level]}
    assert analyse(_doc(seq)).mode == "regex"
    assert analyse(_doc(seq, {"type": "NFC"})).composing
    assert analyse(_doc(seq, {"type": "NFKC"})).mode == "verified"
    assert analyse(_doc(seq, {"type": "Lowercase"})).mode == "verified"
    reversed_seq = {"type": "Sequence", "pretokenizers": [byte_level, _split(O200K_LIKE)]}
    assert analyse(_doc(reversed_seq)).mode == "verified"
    assert analyse(_doc({"type": "Whitespace"})).mode == "verified"
    assert analyse(_doc({"type": "SomethingNew"})).mode == "verified"
    assert analyse(_doc(_split(r"\b\w+\b"))).mode == "verified"
    meta = analyse(
        _doc({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True})
    )
    assert meta.mode == "verified"
    assert meta.window_json is not None
    assert json.loads(meta.window_json)["pre_tokenizer"]["prepend_scheme"] == "never"
    strip = analyse(_doc(seq, added=[{"content": "<mask>", "id": 5, "lstrip": True}]))
    assert strip.strip_tokens and strip.added_margin == len("<mask>") + 1


def test_char_helpers() -> None:
    assert [char_class(c) for c in "aé\u0301 \t\n1٣.—"] == list("LLLSSSNNOO")
    assert char_class("\u200d") == "?"
    assert last_run_start("abc   ", 6, 100) == 3
    assert last_run_start("a" * 50, 50, 10) == -1
    assert word_start("ab  cd", 5, 100) == 2
    assert word_start("abcd", 3, 100) == -1
    text = "x" * 5000 + "y"
    assert common_prefix_len(text, text[:-1] + "z") == 5000
    assert common_prefix_len(text, text + "more") == len(text)
    assert common_prefix_len("", "abc") == 0


def _trained(pre: Any, norm: Any = None) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
    tok.normalizer = norm
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "<|sep|>"])
    tok.train_from_iterator([mixed_text(20_000, seed=9)], trainer)
    return tok


UNKNOWN_STACKS = {
    "metaspace-first": (pre_tokenizers.Metaspace(prepend_scheme="first"), None),
    "metaspace-always-nosplit": (
        pre_tokenizers.Metaspace(prepend_scheme="always", split=False),
        None,
    ),
    "whitespace-lowercase": (pre_tokenizers.Whitespace(), normalizers.Lowercase()),
    "punct-nfkc": (
        pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]),
        normalizers.NFKC(),
    ),
}
SEAM = st.lists(
    st.sampled_from([*" \t\n\r'sa1Ａ.<|é\u0301", "<s>", "<|sep|>", "sep|>"]), max_size=10
).map("".join)


@pytest.mark.parametrize("stack", sorted(UNKNOWN_STACKS))
def test_unknown_components_stay_exact(stack: str) -> None:
    pre, norm = UNKNOWN_STACKS[stack]
    tok = _trained(pre, norm)
    base = mixed_text(2000, seed=4)
    assert IncrementalEncoder(tok)._eng.plan.mode == "verified"
    ran = []

    @settings(
        max_examples=int(os.environ.get("TTFTSCOPE_INCR_EXAMPLES", "100")) // 2,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(a=SEAM, b=SEAM, cut=st.integers(0, 300))
    def run(a: str, b: str, cut: int) -> None:
        check = Exact(IncrementalEncoder(tok), tok, cut="verified")
        for text in (base + a, base + a + b, base[: len(base) - cut] + b):
            check(text)
        assert check.enc.stats.full_fallbacks == 0
        ran.append(check.enc.stats.path)

    run()
    print(f"{stack}: {len(ran)} cases, paths seen {sorted(set(ran))}")


@pytest.mark.parametrize("family", ["o200k", "llama2"])
def test_stripping_added_tokens_stay_exact(family: str, load_family: Any) -> None:
    """Added tokens that eat white space around them (lstrip/rstrip) never straddle a cut."""
    base = load_family(family).hf
    tok = tokenizers.Tokenizer.from_str(base.to_str())
    tok.add_special_tokens(
        [
            tokenizers.AddedToken("<mask>", lstrip=True, rstrip=True),
            tokenizers.AddedToken("[SEP]", lstrip=True),
        ]
    )
    check = Exact(IncrementalEncoder(tok), tok, cut="either")
    assert check.enc._eng.plan.strip_tokens
    text = mixed_text(1500, seed=2)
    pieces = [
        "  ",
        "<ma",
        "sk>",
        "   ",
        "x",
        " \n ",
        "<mask>",
        "  ",
        "[S",
        "EP]",
        " ",
        "tail  ",
        "[SEP]",
        "\t\t",
        "<mask>",
        "end",
        " " * 40,
        "<mask>",
        " " * 40,
        "word",
    ]
    for piece in pieces:
        text += piece
        check(text)
    assert check.enc.stats.full_fallbacks == 0
