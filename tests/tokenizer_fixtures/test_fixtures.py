"""Fixture builder: every family built, verified, cached; verification catches real traps."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import tokenizers

from tests.tokenizer_fixtures import fixture_build as fb
from tests.tokenizer_fixtures import fixtures
from ttftscope.assets import cache_dir
from ttftscope.errors import TokenizerError
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tokenization.tiktoken_convert import known_encodings


def test_every_family_is_built_and_verified(tokenizer_paths: dict[str, Path]) -> None:
    assert tuple(tokenizer_paths) == fixtures.FAMILIES
    for family, folder in tokenizer_paths.items():
        record = fixtures.read_marker(folder)
        assert record is not None and record["family"] == family
        assert record["verified"] != "no reference"
        assert (folder / "tokenizer.json").is_file()


def test_second_build_is_served_from_cache(tokenizer_paths: dict[str, Path]) -> None:
    marker = tokenizer_paths["o200k"] / fixtures.MARKER
    before = marker.stat().st_mtime_ns
    assert fixtures.build_fixture("o200k") == tokenizer_paths["o200k"]
    assert marker.stat().st_mtime_ns == before


def test_verify_names_family_and_first_mismatching_input(
    tokenizer_paths: dict[str, Path],
) -> None:
    # The real trap: tiktoken's possessive \p{N}{1,3}+ used verbatim in HF's regex engine.
    doc = json.loads((tokenizer_paths["cl100k"] / "tokenizer.json").read_text(encoding="utf-8"))
    split = doc["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"]["Regex"] = known_encodings()["cl100k_base"].pat_str
    broken = tokenizers.Tokenizer.from_str(json.dumps(doc))
    reference, name = fb.tiktoken_reference("cl100k")
    built = fb.Built(doc=doc, reference=reference, reference_name=name)
    with pytest.raises(TokenizerError, match=r"fixture cl100k: input '.*Numbers: 1234567") as info:
        fixtures.verify("cl100k", broken, built)
    assert "nothing was cached" in str(info.value)


def test_verify_checks_vectors(load_family: Callable[[str], Tokenizer]) -> None:
    hf = load_family("qwen2").hf
    good = fb.Built(doc={}, vectors=[("Hello world", [9707, 1879])], reference_name="v")
    assert fixtures.verify("qwen2", hf, good) == "1/1 v"
    bad = fb.Built(doc={}, vectors=[("Hello world", [9707, 1])], reference_name="v")
    with pytest.raises(TokenizerError, match="fixture qwen2: test vector 0 'Hello world'"):
        fixtures.verify("qwen2", hf, bad)


def test_gpt2_from_whisper_agrees_with_llama_cpp_gpt2_vectors(
    load_family: Callable[[str], Tokenizer],
) -> None:
    tok = load_family("gpt2")
    vectors = fb.read_vectors("gpt2_gguf")
    assert [tok.encode(text) for text, _ in vectors] == [ids for _, ids in vectors]


def test_tekken_reference_without_mistral_common_agrees(
    monkeypatch: pytest.MonkeyPatch,
    load_family: Callable[[str], Tokenizer],
) -> None:
    monkeypatch.setitem(sys.modules, "mistral_common.tokens.tokenizers.tekken", None)
    fallback, name = fb.tekken_reference()
    assert "tiktoken" in name
    tok = load_family("tekken")
    for text in ("Hello world", "1234567 naïve 🤗\r\n", fixtures.mixed_text(3000)):
        assert tok.encode(text) == fallback(text)


def test_mixed_text_is_deterministic_and_mixed() -> None:
    text = fixtures.mixed_text(50_000)
    assert text == fixtures.mixed_text(50_000) and len(text) >= 50_000
    for needle in ("\r\n", "🤗", "日本語", "\t", "1234567", "n\u0303", "I'm"):
        assert needle in text


def test_stale_fixture_is_rebuilt_in_a_fresh_cache(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = cache_dir()
    for sub in ("files", "packages"):  # reuse the downloaded packages, rebuild the fixture
        (tmp_path / sub).symlink_to(real / sub, target_is_directory=True)
    monkeypatch.setenv("TTFTSCOPE_CACHE_DIR", str(tmp_path))
    folder = fixtures.build_fixture("gpt2")
    assert folder == tmp_path / "tokenizers" / "gpt2"
    record = json.loads((folder / fixtures.MARKER).read_text())
    record["builder_version"] = -1
    (folder / fixtures.MARKER).write_text(json.dumps(record))
    assert fixtures.read_marker(folder) is None
    assert fixtures.read_marker(fixtures.build_fixture("gpt2")) is not None
    assert not list((tmp_path / "tokenizers").glob(".*.tmp"))


def test_unknown_family() -> None:
    with pytest.raises(TokenizerError, match="unknown tokenizer family 'bert'"):
        fixtures.build_fixture("bert")


def test_cli_prints_where_each_fixture_is(
    tokenizer_paths: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fixtures.main(["--family", "gpt2", "--family", "qwen2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["gpt2", "qwen2"]
    assert str(tokenizer_paths["qwen2"]) in out[1] and "cached" in out[1]
    with pytest.raises(SystemExit):
        fixtures.main(["--family", "nope"])
