"""What the gateway checks in a request body before it goes upstream: ``stream``, client token ids.

``stream`` decides how the gateway reads the upstream's answer (SSE or one JSON body), so it
must be read exactly as vLLM 0.32 reads it: pydantic's lax ``bool | None`` (``true``, ``1``,
``1.0``, ``"yes"``, ``"on"``, ``"t"``, ``"1"``, … in any case; their false counterparts;
``null``). Anything else vLLM answers with a 400, and so does the gateway (:func:`stream_of`).

Token ids a client sends itself (a completions ``prompt`` of ids, or
``kv_transfer_params.prompt_token_ids``) are checked against the upstream's vocabulary when
the gateway has its tokenizer: booleans, non-integers (integers beyond 64 bits reach here as
doubles), negatives and ids past the vocabulary are refused with a 400 naming the first bad
one (:func:`token_ids_problem`), rather than reaching the engine.

>>> stream_of({"stream": "Yes"}), stream_of({}), stream_of({"stream": 0.0})
(True, False, False)
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from typing import Any, Final

from ttftscope.tokenization.loader import Tokenizer

# pydantic-core's lax str → bool table (compared case-insensitively, ASCII only, no strip)
_TRUE: Final = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE: Final = frozenset({"0", "off", "f", "false", "n", "no"})


class InvalidField(ValueError):
    """A field vLLM would refuse with a 400; the message is the client's."""


def lax_bool(value: object) -> bool | None:
    """``value`` read as pydantic's lax ``bool | None`` (``None`` stays None); ValueError if
    pydantic would refuse it.

    >>> [lax_bool(v) for v in (True, 1, "on", "F", None)]
    [True, True, True, False, None]
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.isascii():
        word = value.lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
    raise ValueError(f"{_shown(value)} is not a boolean")


def stream_of(body: Mapping[str, Any]) -> bool:
    """Whether vLLM streams its answer to ``body``; :class:`InvalidField` where it refuses.

    >>> try:
    ...     stream_of({"stream": "maybe"})
    ... except InvalidField as exc:
    ...     print(exc)
    stream: Input should be a valid boolean, unable to interpret input (got 'maybe'; vLLM takes true/false, 1/0 or "true"/"false", "yes"/"no", "on"/"off")
    """  # noqa: E501
    value = body.get("stream")
    try:
        return lax_bool(value) is True
    except ValueError:
        got = _shown(value)
        raise InvalidField(
            f"stream: Input should be a valid boolean, unable to interpret input (got {got}; "
            'vLLM takes true/false, 1/0 or "true"/"false", "yes"/"no", "on"/"off")'
        ) from None


def client_ids(path: str, body: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """The token id lists a client sent in ``body`` (to the route ``path``), by field name.

    >>> client_ids("/v1/completions", {"prompt": [[1, 2], [3]]})
    [('prompt[0]', [1, 2]), ('prompt[1]', [3])]
    >>> client_ids("/v1/completions", {"prompt": ["text", "batch"]})
    []
    """
    found: list[tuple[str, list[Any]]] = []
    kv = body.get("kv_transfer_params")
    if isinstance(kv, Mapping) and isinstance(kv.get("prompt_token_ids"), list):
        found.append(("kv_transfer_params.prompt_token_ids", kv["prompt_token_ids"]))
    prompt = body.get("prompt")
    if path.endswith("/v1/completions") and isinstance(prompt, list) and prompt:
        if all(isinstance(p, list) for p in prompt):
            found.extend((f"prompt[{i}]", p) for i, p in enumerate(prompt))
        elif not all(isinstance(p, str) for p in prompt):  # not a batch of texts: ids
            found.append(("prompt", prompt))
    return found


def token_ids_problem(name: str, ids: list[Any], max_id: int) -> str | None:
    """What is wrong with ``ids`` (field ``name``) as token ids of a vocabulary whose largest
    id is ``max_id``, or None.

    >>> print(token_ids_problem("prompt", [1, True], 9))
    prompt[1] is true, not a token id: ids are integers from 0 to 9 (this model's vocabulary)
    >>> token_ids_problem("prompt", [0, 9], 9) is None
    True
    """
    if all(type(i) is int for i in ids) and (not ids or 0 <= min(ids) <= max(ids) <= max_id):
        return None
    for at, i in enumerate(ids):
        if type(i) is not int or not 0 <= i <= max_id:
            return (
                f"{name}[{at}] is {_shown(i)}, not a token id: ids are integers from 0 to {max_id} "
                "(this model's vocabulary)"
            )
    return None  # pragma: no cover - the fast check above found a bad id


def _shown(value: object) -> str:
    """A short rendering of a client's value for a message (containers by kind: they may
    nest past what ``json`` writes).

    >>> _shown("maybe"), _shown(1.2e29), _shown([[1]]), _shown(None)
    ("'maybe'", '1.2e+29', 'a list', 'null')
    """
    if isinstance(value, str):
        return repr(value[:80])
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "an object"
    return json.dumps(value)


_MAX_IDS: weakref.WeakKeyDictionary[Tokenizer, int] = weakref.WeakKeyDictionary()


def max_token_id(tok: Tokenizer) -> int:
    """The largest id vLLM accepts for ``tok``'s model: the tokenizer's largest id (added
    tokens too) or the model's ``vocab_size - 1`` (``config.json``), whichever is larger, as
    ``renderers/base.py::validate_token_ids`` takes it. Cached per tokenizer.
    """
    if tok not in _MAX_IDS:
        vocab = tok.hf.get_vocab(with_added_tokens=True)
        largest = max(vocab.values(), default=-1)
        _MAX_IDS[tok] = max(largest, _config_vocab_size(tok) - 1)
    return _MAX_IDS[tok]


def _config_vocab_size(tok: Tokenizer) -> int:
    folder = tok.path if tok.path.is_dir() else tok.path.parent
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    if not isinstance(config, dict):
        return 0
    text = config.get("text_config")
    sizes = [config.get("vocab_size"), text.get("vocab_size") if isinstance(text, dict) else 0]
    return max((s for s in sizes if isinstance(s, int)), default=0)
