"""IncrementalEncoder == full encode, on every fixture family, at adversarial seams.

Every step also checks the path taken (:mod:`tests.tokenization.exact`): equal ids alone would
pass with a broken incremental path, since that falls back to a full encode.
Hypothesis examples per family: ``TTFTSCOPE_INCR_EXAMPLES`` (default 100).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tokenization.exact import Exact
from tests.tokenizer_fixtures.fixtures import FAMILIES, mixed_text
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tokenization.textscan import RUN_CAP

EXAMPLES = int(os.environ.get("TTFTSCOPE_INCR_EXAMPLES", "100"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Fragments that sit on classic tokenizer seams.
ATOMS = (
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\t\t",
    " \t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "\r\r\n",
    "\n ",
    "0",
    "12",
    "345",
    "6789",
    "1234567",
    "'",
    "'s",
    "'ll",
    "'S",
    "'re",
    "'d",
    "s",
    "ll",
    "ve",
    "a",
    "abc",
    "ABC",
    "Abc",
    "aBC",
    "_",
    "x_y",
    ".",
    "...",
    "/",
    "//",
    "\\",
    "(",
    ")",
    ";",
    "e\u0301",
    "\u0301",
    "\u0303",
    "n",
    "A\u030a",
    "\u1100",
    "\u1161",
    "\u11a8",
    "\uac00",
    "👍",
    "\U0001f3fd",
    "👍🏽",
    "\u200d",
    "👨\u200d👩\u200d👧",
    "🇫🇷",
    "日本",
    "語",
    "中文，",
    "مرحبا",
    "\u200f",
    "עברית",
    "𠀀",
    "\U0001f9ec",
    "\x00",
    "\x1c",
    "\xa0",
    "\u3000",
    "     1\t",
    "    10\timport os\n",
    "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n",
)
SEAM = st.lists(st.sampled_from(ATOMS), max_size=6).map("".join) | st.text(max_size=12)


def _specials(tok: Tokenizer) -> list[str]:
    specials = [t.content for t in tok.added_tokens if len(t.content) > 1]
    common = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "[INST]"]
    return [s for s in common if s in specials] or specials[:3]


@pytest.fixture(scope="module")
def base_text() -> str:
    return mixed_text(3000, seed=3)


@pytest.mark.parametrize("family", FAMILIES)
def test_appends_at_adversarial_seams(
    family: str, load_family: Callable[[str], Tokenizer], base_text: str
) -> None:
    tok = load_family(family)
    specials = _specials(tok)
    ran = []

    @SETTINGS
    @given(
        first=SEAM,
        second=SEAM,
        third=SEAM,
        special=st.sampled_from(specials),
        split=st.integers(0, 40),
        use_special=st.booleans(),
    )
    def run(
        first: str, second: str, third: str, special: str, split: int, use_special: bool
    ) -> None:
        if use_special:  # a special token split across the seam: "<|im_" + "start|>"
            cut = split % (len(special) + 1)
            first, second = first + special[:cut], special[cut:] + second
        check = Exact(IncrementalEncoder(tok), tok)
        text = base_text + first
        check(text)
        text += second
        check(text)
        text += third
        check(text)
        assert check.enc.stats.full_fallbacks == 0
        ran.append(check.paths)

    run()
    print(f"{family}: {len(ran)} seam cases, 0 mismatches, 0 fallbacks")
    assert ran


@pytest.mark.parametrize("family", FAMILIES)
def test_random_edits(family: str, load_family: Callable[[str], Tokenizer], base_text: str) -> None:
    tok = load_family(family)
    ran = []

    @SETTINGS
    @given(pos=st.floats(0, 1), delete=st.integers(0, 50), insert=SEAM, tail=SEAM)
    def run(pos: float, delete: int, insert: str, tail: str) -> None:
        check = Exact(IncrementalEncoder(tok), tok)
        check(base_text)
        at = int(pos * len(base_text))
        check(base_text[:at] + insert + base_text[at + delete :] + tail)
        ran.append(check.paths[-1])

    run()
    print(f"{family}: {len(ran)} edit cases, 0 mismatches, paths {sorted(set(ran))}")
    assert {"edit"} <= set(ran)  # most edits are past the start, where a cut must be found


@pytest.mark.parametrize("family", FAMILIES)
def test_invalid_input_same_result_or_error(
    family: str, load_family: Callable[[str], Tokenizer], base_text: str
) -> None:
    tok = load_family(family)
    check = Exact(IncrementalEncoder(tok), tok)
    check(base_text)
    for bad in (base_text + "a\ud800b", "\udfff"):
        with pytest.raises(Exception) as want:
            tok.encode(bad)
        with pytest.raises(type(want.value)):
            check.enc.encode(bad)
        check.last = None  # a failed call leaves no state to reuse
    check(base_text + "\x00\x00 nul")
    for run in ("a" * 20000, " " * 20000, "7" * 20000, "\n" * 5000, "!" * 20000):
        check(base_text + run)
        if len(run) > RUN_CAP:  # longer than the encoder searches back: it may start over
            check.allow_fallback()
        check(base_text + run + run[:7] + "z")
    check("")
    check("x")


@pytest.mark.parametrize("family", ["o200k", "qwen2", "llama2"])
def test_add_special_tokens_and_shadow(
    family: str, load_family: Callable[[str], Tokenizer], base_text: str
) -> None:
    tok = load_family(family)
    enc = IncrementalEncoder(tok, add_special_tokens=True, shadow_every=2)
    check = Exact(enc, tok, add_special_tokens=True)
    text = base_text
    for piece in ("", " more", "\n\n12", " x"):
        text += piece
        check(text)
    enc.flush()
    assert enc.stats.shadow_checks == 2
    assert enc.stats.shadow_mismatches == 0


def _path(enc: IncrementalEncoder) -> str:
    """The last call's path, read afresh (an attribute would stay narrowed for mypy)."""
    return enc.stats.path


def test_stats_and_paths(load_family: Callable[[str], Tokenizer], base_text: str) -> None:
    tok = load_family("o200k")
    enc = IncrementalEncoder(tok)
    enc.encode(base_text)
    assert _path(enc) == "full"
    enc.encode(base_text + " appended words")
    assert _path(enc) == "append"
    assert enc.stats.last_reused_tokens > 0
    assert enc.stats.last_reencoded_chars < 200
    enc.encode(base_text[:2000] + " edited")
    assert _path(enc) == "edit"
    enc.encode(base_text[:2000] + " edited")
    assert _path(enc) == "same"
    big = mixed_text(40_000, seed=1)
    for piece in ("", " a", " b\n", " c d e"):
        big += piece
        enc.encode(big)
    # ids list + offsets array, and the text as UTF-8 (not 4 bytes a character for an emoji)
    assert (enc.cached_bytes - len(big.encode())) / len(tok.encode(big)) <= 16
    assert enc.cached_bytes < 16 * len(tok.encode(big)) + 2 * len(big)
    enc.reset()
    enc.encode("abc")
    assert _path(enc) == "full"


BIG_CASES = int(os.environ.get("TTFTSCOPE_INCR_BIG_CASES", "6"))


@pytest.mark.parametrize("family", FAMILIES)
def test_realistic_context_random_appends_and_edits(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    """~100K-token agent context: appends at random points and random edits, 0 mismatches."""
    import random

    from ttftscope.agenttext import agent_turn, build_context

    tok = load_family(family)
    rng = random.Random(family)
    text = build_context(100_000, lambda s: len(tok.encode(s)), seed=5)
    check = Exact(IncrementalEncoder(tok), tok)
    check(text)
    for i in range(BIG_CASES):
        turn = agent_turn(i, chars=rng.randint(1, 1400))
        kind = rng.random()
        if kind < 0.5:  # append after a cut at a random point near the end
            text = text[: len(text) - rng.randint(0, 3000)] + turn
        elif kind < 0.8:  # pure append, cut anywhere inside the turn
            text = text + turn[: rng.randint(0, len(turn))]
        else:  # non-append edit somewhere in the context
            at = rng.randrange(len(text))
            text = text[:at] + rng.choice(ATOMS) + text[at + rng.randint(0, 20) :]
        check(text)
    assert check.enc.stats.full_fallbacks == 0
    print(f"{family}: {BIG_CASES} cases, {len(tok.encode(text))} tokens, paths {check.paths}")


LONG_WORDS = (
    "internationalization",
    "Donaudampfschifffahrtsgesellschaft",
    "antidisestablishment",
    "supercalifragilisticexpialidocious",
    "0123456789012345678901234",
    "ZZZZZZZZZZZZZZZZZ",
    "incrementalencoderbenchmark",
    "función_de_codificación",
    "____init____",
)


@pytest.mark.parametrize("family", FAMILIES)
def test_long_words_split_at_every_position(
    family: str, load_family: Callable[[str], Tokenizer], base_text: str
) -> None:
    """Merges inside one long word are where BPE reaches furthest back: cut it everywhere."""
    tok = load_family(family)
    check = Exact(IncrementalEncoder(tok), tok)
    cases = 0
    base_text = base_text[-400:]
    for word in LONG_WORDS:
        for sep in (" ", ""):
            for cut in range(len(word) + 1):
                for text in (base_text + sep + word[:cut], base_text + sep + word):
                    check(text)
                    cases += 1
    assert check.enc.stats.full_fallbacks == 0
    print(f"{family}: {cases} long-word cases, 0 mismatches, 0 fallbacks")


def test_shadow_mismatch_is_counted_and_resets_the_cache(
    load_family: Callable[[str], Tokenizer], base_text: str
) -> None:
    tok = load_family("o200k")
    enc = IncrementalEncoder(tok, shadow_every=1)
    enc.encode(base_text)
    enc.flush()
    enc._ids[5] = enc._ids[5] + 1  # simulate a corrupted cache entry
    text = base_text + " more"
    assert enc.encode(text) != tok.encode(text)  # returned at once; checked in the background
    enc.flush()
    assert enc.stats.shadow_mismatches == 1
    assert enc.encode(text + "!") == tok.encode(text + "!")
    assert enc.stats.path == "full"  # the cache was dropped after the mismatch


@pytest.mark.parametrize("family", ["o200k", "llama2"])
def test_forks_evolve_independently_and_stay_exact(
    family: str, load_family: Callable[[str], Tokenizer], base_text: str
) -> None:
    tok = load_family(family)
    check = Exact(IncrementalEncoder(tok), tok)
    check(base_text)
    other = Exact(check.enc.fork(), tok, last=base_text)
    left, right = base_text + " pipe", base_text + "line 12\n"
    check(left)
    other(right)
    assert other.enc.stats.last_reused_tokens > 0
    check(left + "line")
    assert check.enc.stats.full_fallbacks == other.enc.stats.full_fallbacks == 0
