"""Which cut points are safe for a tokenizer, derived from its declared components.

:func:`analyse` reads ``tokenizer.json`` (normalizer, pre-tokenizer, added tokens) and returns
a :class:`Plan`: how :class:`~ttftscope.tokenization.incremental.IncrementalEncoder` may cut.
The rules follow only from component *types and settings*, never from a family name; a
component this module does not know routes to the verified path (or to full encodes), never to
a guess. The exactness argument is in :mod:`ttftscope.tokenization.incremental`.

>>> plan = analyse({"normalizer": None, "pre_tokenizer": None, "added_tokens": []})
>>> plan.mode
'verified'
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["regex", "space", "verified"]
SPACE_MARK = "\u2581"  # "▁", SentencePiece's visible space

# Regex constructs that read behind the match start, depend on the scan origin, or match a run
# that mixes coarse classes; any of them voids the read-horizon argument. One-character
# lookaheads on white space and "$" read one character and are allowed.
_ALLOWED_LOOKAHEADS = re.compile(r"\(\?[=!]\\[sS]\)")
_UNSAFE_REGEX = re.compile(
    r"\(\?<|\\[bBGAKXRwWzZSDdhPyYk]|\\[1-9]|(?<![\[\\])\^|(?<!\\)\.|\(\?[=!~]|\\p\{[^LMN]"
)
# The only negated class allowed to repeat: "other" (neither space, letter nor number).
_NEGATED_REPEAT = re.compile(r"\[\^([^\]]*)\][+*{]")
_OTHER_CLASS = {r"\s\p{L}\p{N}"}


def regex_is_local(regex: str) -> bool:
    r"""True when every construct in ``regex`` is covered by the read-horizon argument.

    >>> regex_is_local(r"'s|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|\s+(?!\S)|\s+")
    True
    >>> regex_is_local(r"\b\w+")
    False
    """
    body = _ALLOWED_LOOKAHEADS.sub("", regex)
    if _UNSAFE_REGEX.search(body):
        return False
    if not all(_alternative_is_short(alt) for alt in _top_level_alternatives(body)):
        return False
    return all(m.group(1) in _OTHER_CLASS for m in _NEGATED_REPEAT.finditer(body))


# A repeated or optional group may only hold literal alternatives of at most 3 characters,
# such as the contraction suffix (?i:'s|'t|...)?: a bounded, class-free tail. Anything else
# (e.g. (?:\s\p{L}+){8}) can read across runs of several classes and voids the argument.
_LITERAL_GROUP = re.compile(r"(?:\?i:|\?:)?[A-Za-z']{0,3}(?:\|[A-Za-z']{0,3})*")
# One alternative: optional prefix, a run (one or two atoms of one class), a tail, a suffix:
# at most 4 atoms and 2 unbounded repeats. More can chain runs of several classes (and read
# far ahead before failing), which the read-horizon argument does not cover.
_ATOM = re.compile(r"\\p\{[^}]*\}|\\.|\[(?:\\.|[^\]])*\]|\((?:\\.|[^()])*\)|[^|()\[\\]")
_QUANT = re.compile(r"(?:[?*+]|\{\d*,?\d*\})[+?]?")
_MAX_ATOMS, _MAX_UNBOUNDED = 4, 2


def _top_level_alternatives(body: str) -> list[str]:
    depth, start, out, i = 0, 0, [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = body.index("]", i + 2) if "]" in body[i + 2 :] else len(body)
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(body[start:i])
            start = i + 1
        i += 1
    return [*out, body[start:]]


# Atoms allowed to repeat: one coarse class each (letters+marks, numbers, white space with
# "/" as o200k's newline tail, or "other"), so a repeat ends where its class run ends.
_ONE_CLASS = re.compile(
    r"\\p\{[LMN][a-z]?\}|\\s|\\[rntfv]|\\?[^\\\[\]()|]"
    r"|\[(?:\\p\{[LM][a-z]?\})+\]|\[(?:\\p\{N[a-z]?\})+\]|\[(?:\\[rntfvs]| )+/?\]"
    r"|\[\^(?:\\s|\\r|\\n)+\\p\{L\}\\p\{N\}\]"
)


def _one_class(atom: str) -> bool:
    r"""True when a repeated ``atom`` can only match characters of one coarse class.

    >>> _one_class(r"[\p{Lu}\p{Lt}\p{M}]"), _one_class(r"[\r\n/]"), _one_class(r"[\s\p{N}]")
    (True, True, False)
    """
    return _ONE_CLASS.fullmatch(atom) is not None


def _repeatable(atom: str, quantifier: str) -> bool:
    """A quantified group must be literal alternatives; any other repeat must be one class."""
    if atom.startswith("("):
        return _LITERAL_GROUP.fullmatch(atom[1:-1]) is not None
    return quantifier[0] == "?" or _one_class(atom)


def _alternative_is_short(alt: str) -> bool:
    r"""At most 4 atoms, at most 2 of them repeated without bound.

    >>> _alternative_is_short(r" ?[^\s\p{L}\p{N}]++[\r\n]*+")
    True
    >>> _alternative_is_short(r"\p{L}+\s\p{N}+\s\p{N}+")
    False
    >>> _alternative_is_short(r"\p{L}+(?i:'s|'ll)?"), _alternative_is_short(r"\p{L}(?:\s\p{L}+){8}")
    (True, False)
    """
    atoms = unbounded = 0
    pos = 0
    while pos < len(alt):
        m = _ATOM.match(alt, pos)
        if m is None:
            return False
        pos = m.end()
        q = _QUANT.match(alt, pos)
        if q is not None:
            pos = q.end()
            if not _repeatable(m.group(0), q.group(0)):
                return False  # a repeat that mixes classes reads across runs
            unbounded += q.group(0)[0] in "*+" or q.group(0).rstrip("+?").endswith(",}")
        atoms += 1
    return atoms <= _MAX_ATOMS and unbounded <= _MAX_UNBOUNDED


# Normalizers that map every character to characters of the same coarse class and never
# change text across an ASCII character (canonical forms only: NFKC maps "½" to "1⁄2").
_CANONICAL_NORMALIZERS = {"NFC", "NFD"}
# Normalizers/pre-tokenizer flags that add a marker at the start of every input.
_PREFIX_NORMALIZERS = {"Prepend"}


@dataclass(frozen=True)
class Plan:
    """How a tokenizer may be cut.

    ``mode`` "regex": the proven cut at a regex pre-token boundary; "verified": cut, then
    check the overlap with the cached tokens. ``composing``: a canonical normalizer is active,
    so cuts go only before ASCII characters. ``added_margin``: how many characters before the
    common prefix an added-token occurrence can start and still change. ``window_json``: the
    tokenizer to encode windows with (start-of-input markers removed) or None for the main one.

    >>> Plan("regex", False, 0, False, None, ()).mode
    'regex'
    """

    mode: Mode
    composing: bool
    added_margin: int
    strip_tokens: bool
    window_json: str | None
    reasons: tuple[str, ...] = field(default=())


def analyse(doc: dict[str, Any]) -> Plan:
    """Derive the cut rules from a ``tokenizer.json`` document.

    >>> analyse({"normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "ByteLevel",
    ...          "add_prefix_space": False, "use_regex": True}, "added_tokens": []}).mode
    'regex'
    """
    reasons: list[str] = []
    norm_ok, composing = _normalizer_ok(doc.get("normalizer"), reasons)
    pre_ok = _pre_tokenizer_ok(doc.get("pre_tokenizer"), reasons)
    added = doc.get("added_tokens") or []
    margin = max((len(str(t.get("content", ""))) for t in added), default=0)
    strip = any(t.get("lstrip") or t.get("rstrip") or t.get("single_word") for t in added)
    window_doc, removed = _without_prefix_markers(doc)
    # HF normalizes a normalized added token's own text too, marker included ("x" becomes
    # "▁x"), so a marker-free window would match such tokens differently
    marked_added = bool(removed) and any(t.get("normalized") for t in added)
    if marked_added:
        reasons.append(
            "normalized added tokens get the start-of-input marker: no windows "
            "without it, verified cuts only"
        )
    elif removed:
        reasons.append("start-of-input marker removed for windows: " + ", ".join(removed))
    mode: Mode = "regex" if norm_ok and pre_ok and not removed else "verified"
    if mode == "verified" and _space_split_ok(doc, reasons):  # refuses normalized added
        mode = "space"
    window_json = json.dumps(window_doc) if removed and not marked_added else None
    return Plan(mode, composing, margin + 1, strip, window_json, tuple(reasons))


def _space_split_ok(doc: dict[str, Any], reasons: list[str]) -> bool:
    """SentencePiece-style BPE where a "▁" after a non-"▁" character always starts a token.

    Holds when there is no pre-tokenizer, the normalizer only prepends "▁" and maps " " to
    "▁", the model is deterministic BPE without whole-word or word-end rules, "▁" is in the
    vocabulary, and no vocabulary token holds "▁" right after another character than "▁":
    then no merge ever spans such a position, and BPE (merges by rank over adjacent pairs) on
    either side runs as if the other side were not there.
    """
    model = doc.get("model") or {}
    if (
        doc.get("pre_tokenizer") is not None
        or model.get("type") != "BPE"
        or any(
            model.get(k)
            for k in ("dropout", "ignore_merges", "continuing_subword_prefix", "end_of_word_suffix")
        )
    ):
        return False  # a chunk alone would then be read as a whole word or a word's end
    if SPACE_MARK not in (model.get("vocab") or {}):
        return False  # an unknown "▁" could fuse with an unknown character before it
    if any(t.get("normalized") for t in doc.get("added_tokens") or []):
        # HF matches those on normalized text ("▁" for " "); the window encoders search raw
        reasons.append("normalized added tokens: no proven word cuts")
        return False
    norm = doc.get("normalizer")
    steps = (
        []
        if norm is None
        else norm.get("normalizers", [])
        if norm.get("type") == "Sequence"
        else [norm]
    )
    for step in steps:
        if step.get("type") == "Prepend" and step.get("prepend") == SPACE_MARK:
            continue
        if (
            step.get("type") == "Replace"
            and step.get("pattern") == {"String": " "}
            and step.get("content") == SPACE_MARK
        ):
            continue
        return False
    vocab = model.get("vocab") or {}
    mark = SPACE_MARK
    spans = [
        t
        for t in vocab
        if mark in t[1:] and any(t[i] == mark and t[i - 1] != mark for i in range(1, len(t)))
    ]
    if spans:
        reasons.append(f"{len(spans)} vocabulary tokens span a word start, e.g. {spans[0]!r}")
        return False
    reasons.append("SentencePiece BPE: cuts at word starts are proven")
    return True


def _normalizer_ok(norm: dict[str, Any] | None, reasons: list[str]) -> tuple[bool, bool]:
    if norm is None:
        return True, False
    kind = norm.get("type")
    if kind == "Sequence":
        parts = [_normalizer_ok(n, reasons) for n in norm.get("normalizers", [])]
        return all(ok for ok, _ in parts), any(c for _, c in parts)
    if kind in _CANONICAL_NORMALIZERS:
        return True, True
    reasons.append(f"normalizer {kind} is not proven class-preserving")
    return False, True


def _pre_tokenizer_ok(pre: dict[str, Any] | None, reasons: list[str]) -> bool:
    """True for exactly one look-behind-free regex split, first, then only byte maps.

    The regex must see the raw (normalized) text, so it has to come first; later steps may
    only map characters to bytes without moving boundaries (ByteLevel without its regex).
    """
    if pre is None:
        reasons.append("no pre-tokenizer: the model sees whole segments")
        return False
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if not steps:
        reasons.append("empty pre-tokenizer sequence")
        return False
    first, rest = steps[0], steps[1:]
    if first.get("type") == "ByteLevel":
        first_ok = bool(first.get("use_regex", True)) and not first.get("add_prefix_space", True)
    else:
        first_ok = first.get("type") == "Split" and _split_ok(first, reasons)
    if not first_ok:
        reasons.append(f"first pre-tokenizer step {first.get('type')} is not a proven regex split")
        return False
    for step in rest:
        if step.get("type") != "ByteLevel" or step.get("use_regex", True):
            reasons.append(f"pre-tokenizer step {step.get('type')} after the regex is not proven")
            return False
    return True


def _split_ok(step: dict[str, Any], reasons: list[str]) -> bool:
    pattern = step.get("pattern", {})
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    if regex is None or step.get("invert") or step.get("behavior") != "Isolated":
        reasons.append("Split is not an isolated, non-inverted regex split")
        return False
    if not regex_is_local(regex):
        reasons.append("Split regex reads behind or uses an unbounded construct")
        return False
    return True


def _without_prefix_markers(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``doc`` that adds no marker at the start of an input, and what was removed."""
    out = copy.copy(doc)
    removed: list[str] = []
    norm = doc.get("normalizer")
    if norm is not None:
        out["normalizer"] = _strip_norm(copy.deepcopy(norm), removed)
    pre = doc.get("pre_tokenizer")
    if pre is not None:
        out["pre_tokenizer"] = _strip_pre(copy.deepcopy(pre), removed)
    return out, removed


def _strip_norm(norm: dict[str, Any], removed: list[str]) -> dict[str, Any] | None:
    if norm.get("type") == "Sequence":
        kept = [_strip_norm(n, removed) for n in norm.get("normalizers", [])]
        norm["normalizers"] = [n for n in kept if n is not None]
        return norm
    if norm.get("type") in _PREFIX_NORMALIZERS:
        removed.append(f"normalizer {norm.get('type')}")
        return None
    return norm


def _strip_pre(pre: dict[str, Any], removed: list[str]) -> dict[str, Any]:
    if pre.get("type") == "Sequence":
        pre["pretokenizers"] = [_strip_pre(p, removed) for p in pre.get("pretokenizers", [])]
    elif pre.get("type") == "Metaspace" and pre.get("prepend_scheme", "always") != "never":
        removed.append("Metaspace prepend_scheme")
        pre["prepend_scheme"] = "never"
        pre["add_prefix_space"] = False
    elif pre.get("type") == "ByteLevel" and pre.get("add_prefix_space"):
        removed.append("ByteLevel add_prefix_space")
        pre["add_prefix_space"] = False
    return pre
