"""The small GGUF metadata reader: synthetic files of every value kind, real vocab files, errors."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.tokenizer_fixtures.fixture_build import LLAMA_CPP_SDIST
from tests.tokenizer_fixtures.gguf_meta import read_gguf_metadata
from ttftscope.assets import package_file
from ttftscope.errors import TokenizerError


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, vtype: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", vtype) + payload


def write_gguf(path: Path) -> None:
    kvs = [
        _kv("general.architecture", 8, _s("llama")),
        _kv("u32", 4, struct.pack("<I", 7)),
        _kv("f32", 6, struct.pack("<f", 0.5)),
        _kv("flag", 7, struct.pack("<?", True)),
        _kv("i64", 11, struct.pack("<q", -3)),
        _kv("tokens", 9, struct.pack("<IQ", 8, 3) + _s("a") + _s("▁b") + _s("")),
        _kv("types", 9, struct.pack("<IQ", 5, 2) + struct.pack("<ii", 1, 6)),
        _kv(
            "nested",
            9,
            struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 2, 2) + struct.pack("<HH", 1, 2),
        ),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))


def test_every_value_kind(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    write_gguf(path)
    assert read_gguf_metadata(path) == {
        "general.architecture": "llama",
        "u32": 7,
        "f32": 0.5,
        "flag": True,
        "i64": -3,
        "tokens": ["a", "▁b", ""],
        "types": [1, 6],
        "nested": [[1, 2]],
    }


def test_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    write_gguf(path)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(TokenizerError, match="cannot read GGUF metadata"):
        read_gguf_metadata(path)
    path.write_bytes(b"PK\x03\x04rest")
    with pytest.raises(TokenizerError, match="not a GGUF file"):
        read_gguf_metadata(path)


def test_real_llama_spm_vocab() -> None:
    member = "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf"
    meta = read_gguf_metadata(package_file(*LLAMA_CPP_SDIST, member, sdist=True))
    assert meta["general.architecture"] == "llama"
    assert len(meta["tokenizer.ggml.tokens"]) == len(meta["tokenizer.ggml.scores"]) == 32000
    assert meta["tokenizer.ggml.tokens"][1] == "<s>"
