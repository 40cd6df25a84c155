"""Regressions from adversarial fuzzing: configurations outside the proven cases must still
give a full encode's ids (by falling back), never a crash or a wrong splice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import tokenizers

from ttftscope.tokenization.boundary import analyse
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer


def _doc(paths: dict[str, Path], family: str) -> dict[str, object]:
    doc: dict[str, object] = json.loads((paths[family] / "tokenizer.json").read_text())
    return doc


def _with_added(doc: dict[str, object], contents: list[str], **flags: bool) -> tokenizers.Tokenizer:
    added: list[dict[str, object]] = doc["added_tokens"]  # type: ignore[assignment]
    vocab: dict[str, int] = doc["model"]["vocab"]  # type: ignore[index]
    nxt = max(max(int(t["id"]) for t in added), max(vocab.values())) + 1  # type: ignore[call-overload]
    for i, content in enumerate(contents):
        added.append(
            {
                "id": nxt + i,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
                **flags,
            }
        )
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


def test_normalized_added_tokens_under_nfc_fall_back_exactly(
    tokenizer_paths: dict[str, Path],
) -> None:
    hf = _with_added(_doc(tokenizer_paths, "qwen2"), ["ab;", "é<", "K1"], normalized=True)
    for text in ("ab\u037e", "e\u0301<", "\u212a1", "plain text ab\u037e then more"):
        enc = IncrementalEncoder(hf)
        assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids
        longer = text + " and K1 again"
        assert enc.encode(longer) == hf.encode(longer, add_special_tokens=False).ids


def test_tokenizer_reconfigured_after_encoders_exist(
    load_family: Callable[[str], Tokenizer],
) -> None:
    tok = load_family("cl100k")
    hf = tokenizers.Tokenizer.from_str(tok.hf.to_str())  # a private copy we may change
    old = "some text " * 20
    IncrementalEncoder(hf).encode(old)
    hf.add_special_tokens(["<NEW>"])
    enc = IncrementalEncoder(hf)
    enc.encode(old)
    new = old + "and <NEW> here"
    assert enc.encode(new) == hf.encode(new, add_special_tokens=False).ids
    hf.enable_truncation(max_length=16)
    assert enc.encode(new + "!") == hf.encode(new + "!", add_special_tokens=False).ids
    hf.no_truncation()
    hf.encode_special_tokens = True
    assert enc.encode(new + "!?") == hf.encode(new + "!?", add_special_tokens=False).ids


@pytest.mark.parametrize(
    ("rx", "old", "tail"),
    [
        (
            r"\p{L}+(?:(?:\s\p{L}+){8}!)?|\p{N}|\s+|[^\s\p{L}\p{N}]+",
            "hello world, the one two three four five six seven eight nine",
            "!",
        ),
        (
            r"\p{L}+\s\p{N}+\s\p{N}+\s\p{N}+\s\p{N}+\s\p{N}+!|\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+",
            "hello world, the abc 1111 2222 3333 4444 5555",
            "!",
        ),
        (
            r"\p{L}+(?:'a'b'c'd'e'f'g'h'i'j)?|\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+",
            "hello world, the xx'a'b'c'd'e'f'g'h'i'",
            "j",
        ),
        (
            r"\p{L}+[\s\p{N}]+!|\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+",
            "hello world, the abc 1111 2222 3333 4444 5555",
            "!",
        ),
    ],
)
def test_regexes_that_read_far_ahead_are_not_treated_as_local(
    tokenizer_paths: dict[str, Path], rx: str, old: str, tail: str
) -> None:
    doc = _doc(tokenizer_paths, "gpt2")
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = rx  # type: ignore[index]
    assert analyse(doc).mode == "verified"
    hf = tokenizers.Tokenizer.from_str(json.dumps(doc))
    enc = IncrementalEncoder(hf)
    enc.encode(old)
    assert enc.encode(old + tail) == hf.encode(old + tail, add_special_tokens=False).ids


def test_components_swapped_on_a_live_tokenizer_are_noticed(
    load_family: Callable[[str], Tokenizer],
) -> None:
    hf = tokenizers.Tokenizer.from_str(load_family("cl100k").hf.to_str())
    old = "Some Words Before The Special Token Here. " * 3
    new = old + "AND <|endoftext|>  After"
    enc = IncrementalEncoder(hf)
    enc.encode(old)
    hf.normalizer = tokenizers.normalizers.Lowercase()
    assert enc.encode(old) == hf.encode(old, add_special_tokens=False).ids
    assert enc.encode(new) == hf.encode(new, add_special_tokens=False).ids
    hf.normalizer = None
    hf.add_special_tokens(
        [tokenizers.AddedToken("<|endoftext|>", lstrip=True, rstrip=True, special=True)]
    )
    # flags of an existing token: too costly to re-read per call, so new encoders see them
    fresh = IncrementalEncoder(hf)
    fresh.encode(old)
    assert fresh.encode(new) == hf.encode(new, add_special_tokens=False).ids


@pytest.mark.parametrize("family", ["cl100k", "llama2", "mistral_v3"])
def test_tokens_added_while_an_encoder_is_in_use_are_seen_at_the_next_call(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    hf = tokenizers.Tokenizer.from_str(load_family(family).hf.to_str())  # a private copy
    enc = IncrementalEncoder(hf)
    text = "some text with zqxjv and more " * 8
    enc.encode(text)
    hf.add_tokens(["zqxjv and"])
    hf.add_special_tokens(["<LATE>"])
    for extra in ("zqxjv and <LATE>", "zqxjv and <LATE> again"):
        text += extra
        assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_an_encode_that_bypasses_the_cache_reports_nothing_reused(
    load_family: Callable[[str], Tokenizer],
) -> None:
    """Callers rely on ``last_reused_tokens`` (the gateway keeps those ids serialized)."""
    hf = tokenizers.Tokenizer.from_str(load_family("cl100k").hf.to_str())
    enc = IncrementalEncoder(hf)
    enc.encode("some text " * 20)
    enc.encode("some text " * 20 + "and more")
    assert enc.stats.last_reused_tokens > 0
    hf.enable_truncation(max_length=16)  # truncation: every call is a plain full encode
    assert enc.encode("other text " * 20) == hf.encode("other text " * 20).ids
    assert enc.stats.path == "full" and enc.stats.last_reused_tokens == 0
