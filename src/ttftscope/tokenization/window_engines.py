"""The private tokenizer objects an incremental encoder works with, built once per tokenizer.

``full``: the tokenizer without its post-processor (so offsets are never trimmed and no
BOS/EOS is inserted; those are added back at the ends). ``window``: the same without
start-of-input markers (a prepended "▁" or prefix space must not appear at a cut inside a
segment). ``prefix``/``suffix``: ids the post-processor adds, checked against the real
tokenizer on probe texts; when they do not reproduce it, ``specials_ok`` is False and the
encoder uses full encodes for ``add_special_tokens=True``.

>>> Engines.__name__
'Engines'
"""

from __future__ import annotations

import contextlib
import json
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

import tokenizers

from ttftscope.tokenization.boundary import Plan, analyse
from ttftscope.tokenization.fastpath import FastWindow, bytes_to_unicode, shared_ints
from ttftscope.tokenization.spacewindow import SpaceWindow, has_every_byte_token

# model settings a user can flip on a live tokenizer (the model's vocabulary is too big to read)
_MODEL_FLAGS = (
    "dropout",
    "unk_token",
    "fuse_unk",
    "byte_fallback",
    "ignore_merges",
    "continuing_subword_prefix",
    "end_of_word_suffix",
)
_PROBES = ("hello world", " Hi  there\n\n\t12345 <x>", "é日本 😀", "a")


class HasHF(Protocol):
    hf: tokenizers.Tokenizer


@dataclass(frozen=True)
class Engines:
    """Private encoders and the cut plan of one tokenizer (see the module docstring)."""

    main: tokenizers.Tokenizer
    full: tokenizers.Tokenizer
    window: tokenizers.Tokenizer
    plan: Plan
    added_ids: frozenset[int]
    added: dict[int, str]
    unk_id: int | None
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    specials_ok: bool
    plain_ok: bool
    max_id: int
    fast: FastWindow | None = None
    space: SpaceWindow | None = None
    fingerprint: tuple[object, ...] = ()
    added_state: str = ""
    new_ids: tuple[int, ...] = ()

    def current(self) -> bool:
        """False once the tokenizer was reconfigured (tokens added, truncation, ...)."""
        return self.fingerprint == fingerprint(self.main) and all(
            self.main.id_to_token(i) is None for i in self.new_ids
        )


def fingerprint(main: tokenizers.Tokenizer) -> tuple[object, ...]:
    """Settings a user can change on a live tokenizer that change its ids: a few µs to read
    (about 60 µs with caches cold after a full encode), paid on every call.

    >>> fingerprint(tokenizers.Tokenizer(tokenizers.models.BPE()))[:7]
    (None, None, False, None, None, <class 'tokenizers.models.BPE'>, 0)
    """
    model = main.model  # one wrapper for all flags: each fetch is a cold call after a full encode
    return (
        main.truncation,
        main.padding,
        bool(getattr(main, "encode_special_tokens", False)),
        _state(main.normalizer),
        _state(main.pre_tokenizer),
        type(model),
        main.get_vocab_size(with_added_tokens=False),  # a replaced model, larger or smaller
        tuple(getattr(model, flag, None) for flag in _MODEL_FLAGS),
    )


def new_token_ids(main: tokenizers.Tokenizer) -> tuple[int, ...]:
    """Ids the next added token can get: free now, taken once a token is added.

    ``get_vocab_size(with_added_tokens=True)`` would tell too, but costs 12 µs (150 µs with
    cold caches) with Mistral's 771 added tokens; ``id_to_token`` costs 0.1 µs. HF gives a
    new token the next id after the highest added one, or the model's size; both are probed.

    >>> new_token_ids(tokenizers.Tokenizer(tokenizers.models.BPE()))
    (0,)
    """
    top = max(main.get_added_tokens_decoder(), default=-1)
    sizes = (main.get_vocab_size(with_added_tokens=w) for w in (False, True))
    return tuple(sorted(i for i in {top + 1, *sizes} if main.id_to_token(i) is None))


def _state(component: Any) -> object:
    return None if component is None else component.__getstate__()


def added_state(main: tokenizers.Tokenizer) -> str:
    """Every added token with its flags; too slow for each call (≈0.2 ms with 1000 tokens),
    so it is compared when an encoder is created."""
    return repr(sorted(main.get_added_tokens_decoder().items()))


_CACHE: weakref.WeakKeyDictionary[Any, Engines] = weakref.WeakKeyDictionary()


def engines_for(tok: HasHF | tokenizers.Tokenizer) -> Engines:
    """Build (or reuse) the engines of a loaded tokenizer or a bare ``tokenizers.Tokenizer``.

    >>> engines_for(o200k_tok).plan.mode, engines_for(o200k_tok) is engines_for(o200k_tok)
    ('regex', True)
    """
    try:
        found = _CACHE.get(tok)
    except TypeError:  # not weak-referenceable
        found = None
    if found is not None and found.current() and found.added_state == added_state(found.main):
        return found
    main = hf_of(tok)
    built = _build(main)
    with contextlib.suppress(TypeError):  # not weak-referenceable: rebuilt per encoder
        _CACHE[tok] = built
    return built


def hf_of(tok: HasHF | tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """The ``tokenizers.Tokenizer`` of a loaded tokenizer (or ``tok`` itself).

    >>> hf_of(o200k_tok) is o200k_tok.hf is hf_of(o200k_tok.hf)
    True
    """
    return tok if isinstance(tok, tokenizers.Tokenizer) else tok.hf


def _build(main: tokenizers.Tokenizer) -> Engines:
    doc: dict[str, Any] = json.loads(main.to_str())
    plan = analyse(doc)
    full = main if _post_keeps_offsets(doc.get("post_processor")) else _without_post(doc)
    window = _without_post(json.loads(plan.window_json)) if plan.window_json else full
    added = {int(t["id"]): str(t["content"]) for t in doc.get("added_tokens") or []}
    unk = (doc.get("model") or {}).get("unk_token")
    unk_id = main.token_to_id(unk) if isinstance(unk, str) else None
    # truncation/padding settings change what a full encode returns, and special tokens
    # encoded as text follow rules we do not model: never splice those
    plain_ok = (
        not doc.get("truncation")
        and not doc.get("padding")
        and not getattr(main, "encode_special_tokens", False)
        and all(
            main.encode(p, add_special_tokens=False).ids
            == full.encode(p, add_special_tokens=False).ids
            for p in _PROBES
        )
        and not _two_way_added(doc, main)
        and not _may_drop_characters(doc)
    )
    prefix, suffix, specials_ok = _specials(main, full)
    max_id = max([main.get_vocab_size(with_added_tokens=True), *added])
    table = shared_ints(max_id)
    fast = FastWindow.build(doc, full, table) if plan.mode == "regex" else None
    space = SpaceWindow.build(doc, window, table) if plan.mode == "space" else None
    return Engines(
        main,
        full,
        window,
        plan,
        frozenset(added),
        added,
        unk_id,
        prefix,
        suffix,
        specials_ok,
        plain_ok,
        max_id,
        fast,
        space,
        fingerprint(main),
        added_state(main),
        new_token_ids(main),
    )


def _two_way_added(doc: dict[str, Any], main: tokenizers.Tokenizer) -> bool:
    """An added token that may or may not be split out (white-space or word rules) while the
    model can also make its text: a token with its id then cannot tell which one made it."""
    return any(
        any(t.get(f) for f in ("lstrip", "rstrip", "single_word"))
        and main.model.token_to_id(str(t.get("content", ""))) is not None
        for t in doc.get("added_tokens") or []
    )


def _may_drop_characters(doc: dict[str, Any]) -> bool:
    """A BPE without unknown token drops characters it has no symbol for, so offsets skip
    them; only a complete byte alphabet (byte fallback or ByteLevel) rules that out."""
    model = doc.get("model") or {}
    if model.get("type") != "BPE" or model.get("unk_token") is not None:
        return False
    vocab = model.get("vocab") or {}
    if model.get("byte_fallback") and has_every_byte_token(vocab):
        return False
    pre = json.dumps(doc.get("pre_tokenizer"))
    byte_level = '"ByteLevel"' in pre and all(ch in vocab for ch in bytes_to_unicode().values())
    return not byte_level


def _post_keeps_offsets(post: dict[str, Any] | None) -> bool:
    """True when, without special tokens, the post-processor changes neither ids nor offsets."""
    if post is None or post.get("type") == "TemplateProcessing":
        return True
    return post.get("type") == "ByteLevel" and not post.get("trim_offsets", True)


def _without_post(doc: dict[str, Any]) -> tokenizers.Tokenizer:
    doc = dict(doc)
    doc["post_processor"] = None
    return tokenizers.Tokenizer.from_str(json.dumps(doc))


def _specials(
    main: tokenizers.Tokenizer, full: tokenizers.Tokenizer
) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    with_sp = main.encode(_PROBES[0], add_special_tokens=True).ids
    plain = full.encode(_PROBES[0], add_special_tokens=False).ids
    for i in range(len(with_sp) - len(plain) + 1):
        if with_sp[i : i + len(plain)] == plain:
            prefix, suffix = tuple(with_sp[:i]), tuple(with_sp[i + len(plain) :])
            break
    else:
        return (), (), False
    ok = all(
        main.encode(p, add_special_tokens=True).ids
        == [*prefix, *full.encode(p, add_special_tokens=False).ids, *suffix]
        for p in _PROBES
    )
    return prefix, suffix, ok
