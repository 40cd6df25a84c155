r"""Translate an onig pre-tokenizer regex into a Python ``re`` pattern exact on ASCII input.

Only a whitelist of constructs is translated; anything else returns None (no fast path):
``\p{..}`` classes become their ASCII members (A-Z, a-z, 0-9; the title-case, modifier,
other-letter and mark classes have none), ``\s`` becomes onig's ASCII white space (tab, LF,
VT, FF, CR, space: onig's Unicode ``\s`` lacks U+001C..U+001F, Python's has them), ``$``
becomes onig's (Ruby syntax) end of line ``(?=\n|\Z)``, groups become non-capturing. A
case-insensitive group may hold only literals and literal classes (on ASCII input both
engines fold exactly A-Z/a-z). Both engines are backtracking matchers with ordered
alternation and the same greedy, possessive and look-ahead semantics, so on ASCII input each
sub-expression, hence the pattern, matches the same strings at the same positions in the
same order of preference; the tests compare both splits on random ASCII text.

>>> translate_ascii(r"\p{N}{1,3}|\s+(?!\S)")
'[0-9]{1,3}|[\\t\\n\\x0b\\x0c\\r ]+(?![^\\t\\n\\x0b\\x0c\\r ])'
"""

from __future__ import annotations

import re

_WS = r"\t\n\x0b\x0c\r "  # onig's \s on ASCII (U+001C..U+001F are not white space there)
_ESCAPES = {"r": r"\r", "n": r"\n", "t": r"\t"}
_ASCII_CLASSES = {
    "L": "A-Za-z",
    "Lu": "A-Z",
    "Ll": "a-z",
    "Lt": "",
    "Lm": "",
    "Lo": "",
    "M": "",
    "Mn": "",
    "Mc": "",
    "Me": "",
    "N": "0-9",
    "Nd": "0-9",
}


class _Refuse(Exception):
    """A construct the ASCII translation does not cover."""


def translate_ascii(regex: str) -> str | None:
    r"""The pattern as a Python ``re`` pattern matching identically on ASCII input, or None.

    >>> translate_ascii(r"\b\w+") is None
    True
    """
    try:
        out, i, ci = [], 0, [False]
        while i < len(regex):
            piece, i = _translate_at(regex, i, ci)
            out.append(piece)
        return "".join(out) if ci == [False] else None
    except (_Refuse, IndexError):
        return None


def _translate_at(rx: str, i: int, ci: list[bool]) -> tuple[str, int]:
    ch = rx[i]
    if ch == "\\":
        if ci[-1]:
            raise _Refuse("escape inside a case-insensitive group")
        item, i = _escape(rx, i)
        return (item if item.startswith("[") else f"[{item}]" if item else "(?!)"), i
    if ch == "[":
        if ci[-1] and "\\" in rx[i : rx.index("]", i)]:
            raise _Refuse("class escape inside a case-insensitive group")
        return _char_class(rx, i)
    if ch == "(":
        for head in ("(?:", "(?=", "(?!", "(?i:"):
            if rx.startswith(head, i):
                ci.append(ci[-1] or head == "(?i:")
                return head, i + len(head)
        if rx[i + 1] == "?":
            raise _Refuse("group kind")
        ci.append(ci[-1])
        return "(?:", i + 1
    if ch == ")":
        ci.pop()
        return ")", i + 1
    if ch == "$":
        return r"(?=\n|\Z)", i + 1  # onig (Ruby syntax): end of line
    if ch in "^.":
        raise _Refuse(ch)
    if ch in "?*+|{}," or ch.isalnum():
        return ch, i + 1
    return re.escape(ch), i + 1


def _escape(rx: str, i: int) -> tuple[str, int]:
    """One escape as class members (no brackets) or a bracketed class; i at the backslash."""
    nxt = rx[i + 1]
    if nxt == "p":
        end = rx.index("}", i)
        name = rx[i + 3 : end]
        if rx[i + 2] != "{" or name not in _ASCII_CLASSES:
            raise _Refuse(f"class {name}")
        return _ASCII_CLASSES[name], end + 1
    if nxt == "s":
        return _WS, i + 2
    if nxt == "S":
        return f"[^{_WS}]", i + 2
    if nxt in _ESCAPES:
        return _ESCAPES[nxt], i + 2
    if nxt.isalnum() or not nxt.isascii():
        raise _Refuse(f"escape \\{nxt}")
    return re.escape(nxt), i + 2


def _char_class(rx: str, i: int) -> tuple[str, int]:
    i += 1
    negated = rx[i] == "^"
    i += negated
    members = []
    while rx[i] != "]":
        if rx[i] == "\\":
            item, i = _escape(rx, i)
            if item.startswith("["):
                raise _Refuse("negated escape inside a class")
            members.append(item)
        elif rx[i] in "[-^":
            raise _Refuse("nested class or range")
        else:
            members.append(re.escape(rx[i]))
            i += 1
    body = "".join(members)
    if not body:
        return (r"[\x00-\x7f]" if negated else "(?!)"), i + 1
    return f"[{'^' if negated else ''}{body}]", i + 1
