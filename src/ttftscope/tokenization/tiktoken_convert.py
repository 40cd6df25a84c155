"""Turn a tiktoken rank file into a Hugging Face ``tokenizers`` tokenizer, offline.

tiktoken merges, at each step, the adjacent pair whose *concatenation* has the lowest rank, and
returns a piece that is itself a token without merging at all. An HF byte-level BPE reproduces
that when every split ``(left, right)`` of a token ``t`` (both halves being tokens) becomes a
merge with priority ``rank(t)``, and ``ignore_merges`` is on (the whole-piece shortcut). This is
the algorithm of transformers' ``TikTokenConverter``, rewritten here so no transformers is needed.

Patterns and special tokens of the OpenAI encodings come from the installed
``tiktoken_ext.openai_public`` module, evaluated with stub loaders so nothing is downloaded.

>>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
>>> tok = ranks_to_tokenizer(ranks, r"\\w+|\\s+", {"<|end|>": 300})
>>> tok.encode("ab a<|end|>").ids
[256, 32, 97, 300]
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import os
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import tokenizers

from ttftscope.errors import TokenizerError

__all__ = [
    "TiktokenSpec",
    "adapt_pattern",
    "bytes_to_unicode",
    "known_encodings",
    "ranks_to_tokenizer",
    "ranks_to_tokenizer_json",
    "read_rank_file",
    "recognise",
]

CONVERTER_VERSION = 2  # bump when the produced JSON changes, so cached conversions are redone


@dataclass(frozen=True)
class TiktokenSpec:
    """What a rank file does not say: the split pattern and the special tokens.

    >>> TiktokenSpec("x", r"\\s+").special_tokens
    {}
    """

    name: str
    pat_str: str
    special_tokens: dict[str, int] = field(default_factory=dict)
    expected_hash: str | None = None  # sha256 of the uncompressed rank file, when published
    n_ranks: int | None = None


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character table used by byte-level BPE.

    >>> bytes_to_unicode()[32], bytes_to_unicode()[65]
    ('Ġ', 'A')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _to_unicode(token: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


_POSSESSIVE_INTERVAL = re.compile(r"(?<!\\)(\{\d+(?:,\d*)?\})\+")


def adapt_pattern(pat_str: str) -> str:
    """Rewrite tiktoken (fancy-regex) syntax that Oniguruma, HF's engine, reads differently.

    Oniguruma treats ``X{1,3}+`` as ``(X{1,3})+`` (any run), not as a possessive interval, so
    the ``+`` is dropped; the other possessives (``?+ *+ ++``) mean the same in both engines.

    >>> adapt_pattern(r"\\p{N}{1,3}+|\\s++$")
    '\\\\p{N}{1,3}|\\\\s++$'
    """
    return _POSSESSIVE_INTERVAL.sub(r"\1", pat_str)


def read_rank_file(path: Path) -> tuple[dict[bytes, int], str]:
    """Parse a ``.tiktoken`` (or gzipped) rank file; return ranks and the sha256 of its text.

    >>> path = result_dir / "bytes.tiktoken"  # one token per byte value, rank = the byte
    >>> _ = path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\\n"
    ...                             for b in range(256)))
    >>> ranks, digest = read_rank_file(path); len(ranks), ranks[b"a"], len(digest)
    (256, 97, 64)
    """
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TokenizerError(f"cannot read rank file {path}: {exc}") from exc
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token_b64, rank = line.split()
            ranks[base64.b64decode(token_b64, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise TokenizerError(
                f"{path}: line {lineno} is not '<base64 token> <rank>': {line[:60]!r}",
                hint="a .tiktoken file has one base64-encoded token and its rank per line",
            ) from exc
    if not ranks:
        raise TokenizerError(f"{path}: rank file is empty")
    return ranks, hashlib.sha256(raw).hexdigest()


def _stub_loader(sink: dict[str, Any]) -> Callable[..., dict[bytes, int]]:
    def load(*args: Any, **kwargs: Any) -> dict[bytes, int]:
        sink["expected_hash"] = kwargs.get("expected_hash")
        return {}

    return load


@cache
def known_encodings() -> dict[str, TiktokenSpec]:
    """Specs of the encodings in the installed ``tiktoken_ext.openai_public``, read offline.

    Each constructor runs with its loaders replaced by stubs (in a copy of the module globals,
    so the real module is never modified) to capture ``pat_str``, specials and expected hash.

    >>> known_encodings()["cl100k_base"].special_tokens["<|endoftext|>"]
    100257
    """
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    sizes = {"gpt2": 50256, "r50k_base": 50256, "p50k_base": 50280, "cl100k_base": 100256}
    specs: dict[str, TiktokenSpec] = {}
    for name, ctor in openai_public.ENCODING_CONSTRUCTORS.items():
        sink: dict[str, Any] = {}
        stub = _stub_loader(sink)
        env = {**vars(openai_public), "load_tiktoken_bpe": stub}
        env["data_gym_to_mergeable_bpe_ranks"] = stub
        # Rebind every module function to the stubbed globals: constructors call each other.
        for key, val in list(env.items()):
            if isinstance(val, types.FunctionType) and val.__module__ == openai_public.__name__:
                env[key] = types.FunctionType(val.__code__, env, val.__name__, val.__defaults__)
        info = env[ctor.__name__]()
        specs[name] = TiktokenSpec(
            name=name,
            pat_str=info["pat_str"],
            special_tokens=dict(info["special_tokens"]),
            expected_hash=sink.get("expected_hash"),
            n_ranks=sizes.get(name, 199998 if name.startswith("o200k") else None),
        )
    return specs


def _sidecar_spec(path: Path) -> TiktokenSpec | None:
    base = path.name.removesuffix(".gz")
    sidecar = path.with_name(base + ".json")
    if not sidecar.is_file():
        return None
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        return TiktokenSpec(
            name=str(data.get("name", base.removesuffix(".tiktoken"))),
            pat_str=str(data["pat_str"]),
            special_tokens={str(k): int(v) for k, v in data.get("special_tokens", {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TokenizerError(
            f"sidecar {sidecar} is not valid: {exc!r}",
            hint='expected JSON like {"pat_str": "...", '
            '"special_tokens": {"<|endoftext|>": 100257}}',
        ) from exc


def recognise(path: Path, ranks: Mapping[bytes, int], digest: str) -> TiktokenSpec:
    """Pick the pattern and specials for a rank file: sidecar JSON, then hash, then shape.

    A sidecar ``<file>.tiktoken.json`` (``{"pat_str": ..., "special_tokens": {...}}``) always
    wins. Otherwise the file must be a known OpenAI encoding (same hash, or same rank count and
    the same well-known tokens, which recognises e.g. whisper's copy of GPT-2's ranks).

    >>> recognise(Path("x.tiktoken"), {b"a": 0}, "0" * 64)
    Traceback (most recent call last):
    ...
    ttftscope.TokenizerError: x.tiktoken: unrecognised tiktoken rank file (1 ranks)...
    """
    spec = _sidecar_spec(path)
    if spec is not None:
        return spec
    known = known_encodings()
    for spec in known.values():
        if spec.expected_hash == digest:
            return spec
    # Shape fallback: GPT-2's ranks ship without a published .tiktoken hash.
    shape = {50256: "gpt2", 100256: "cl100k_base", 199998: "o200k_base"}
    name = shape.get(len(ranks))
    if name is not None and ranks.get(b"!") == 0 and ranks.get(b"\xff") is not None:
        return known[name]
    sidecar = path.with_name(path.name.removesuffix(".gz") + ".json")
    raise TokenizerError(
        f"{path.name}: unrecognised tiktoken rank file ({len(ranks)} ranks) - "
        "its split pattern and special tokens are unknown",
        hint=f'write {sidecar.name} beside it: {{"pat_str": "<regex>", '
        '"special_tokens": {"<|endoftext|>": <id>}}',
    )


def _derive_merges(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            left_rank, right_rank = ranks.get(left), ranks.get(right)
            if left_rank is not None and right_rank is not None:
                merges.append((rank, left_rank, right_rank, left, right))
    merges.sort(key=lambda m: (m[0], m[1], m[2]))
    return [(m[3], m[4]) for m in merges]


def ranks_to_tokenizer_json(
    ranks: Mapping[bytes, int],
    pat_str: str,
    special_tokens: Mapping[str, int],
    *,
    id_offset: int = 0,
) -> dict[str, Any]:
    """The ``tokenizer.json`` document of a byte-level BPE equivalent to tiktoken.

    ``id_offset`` shifts every rank (tekken reserves the first ids for special tokens).

    >>> doc = ranks_to_tokenizer_json({bytes([b]): b for b in range(256)}, r"\\S+", {}, id_offset=3)
    >>> doc["model"]["vocab"]["!"]
    36
    """
    vocab = {_to_unicode(tok): rank + id_offset for tok, rank in ranks.items()}
    # tokenizers renumbers added tokens that are not in the model vocab to follow it densely,
    # which would lose cl100k's id gaps; placing them in the vocab pins their ids. The model
    # never emits them: added tokens are split out of the text before the model runs.
    vocab.update(special_tokens)
    merges = [[_to_unicode(a), _to_unicode(b)] for a, b in _derive_merges(ranks)]
    added = [
        {
            "id": tid,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for content, tid in sorted(special_tokens.items(), key=lambda kv: kv[1])
    ]
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": adapt_pattern(pat_str)},
                    "behavior": "Isolated",
                    "invert": False,
                },
                byte_level,
            ],
        },
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


def ranks_to_tokenizer(
    ranks: Mapping[bytes, int],
    pat_str: str,
    special_tokens: Mapping[str, int],
    *,
    id_offset: int = 0,
) -> tokenizers.Tokenizer:
    """Like :func:`ranks_to_tokenizer_json`, loaded as a ``tokenizers.Tokenizer``.

    >>> ranks_to_tokenizer({bytes([b]): b for b in range(256)}, r"\\S+", {}).encode("hi").ids
    [104, 105]
    """
    doc = ranks_to_tokenizer_json(ranks, pat_str, special_tokens, id_offset=id_offset)
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


def convert_rank_file(path: Path, cache_folder: Path) -> tuple[Path, TiktokenSpec]:
    """Convert ``path`` once; return the cached ``tokenizer.json`` path and the spec used.

    The cache key covers the rank file, the spec (so a new sidecar re-converts) and
    :data:`CONVERTER_VERSION`.

    >>> path = result_dir / "bytes.tiktoken"  # an unknown rank file, told by its sidecar
    >>> _ = path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\\n"
    ...                             for b in range(256)))
    >>> sidecar = {"pat_str": r"\\S+", "special_tokens": {"<|end|>": 256}}
    >>> _ = Path(f"{path}.json").write_text(json.dumps(sidecar))
    >>> out, spec = convert_rank_file(path, result_dir / "cache")
    >>> out.parent.name, out.suffix, spec.special_tokens
    ('cache', '.json', {'<|end|>': 256})
    """
    ranks, digest = read_rank_file(path)
    spec = recognise(path, ranks, digest)
    key_src = json.dumps(
        [digest, spec.pat_str, sorted(spec.special_tokens.items()), CONVERTER_VERSION]
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:24]
    out = cache_folder / f"{spec.name}-{key}.json"
    if not out.is_file():
        doc = ranks_to_tokenizer_json(ranks, spec.pat_str, spec.special_tokens)
        cache_folder.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"{out.name}.{os.getpid()}.part")
        tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        tmp.replace(out)  # atomic, so concurrent loaders never read a half-written file
    return out, spec
