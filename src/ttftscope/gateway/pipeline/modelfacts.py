"""What the gateway reads from a served model's folder: the facts that change what vLLM does.

>>> model_type(Path("/nonexistent")) is None, caps_new_tokens(Path("/nonexistent"))
(True, False)
"""

from __future__ import annotations

from pathlib import Path

import orjson

from ttftscope.tokenization.loader import Tokenizer

__all__ = ["caps_new_tokens", "longest_token_chars", "model_type"]


def longest_token_chars(tok: Tokenizer) -> int:
    """The most characters a token of ``tok`` can cover: the length of its longest vocabulary
    string (a byte-level or byte-fallback token's string is at least as long as the text it
    stands for), so a prompt longer than ``max_model_len`` times this is surely too long.

    >>> longest_token_chars(o200k_tok) >= max(map(len, o200k_tok.hf.get_vocab()))
    True
    """
    vocab = tok.hf.get_vocab(with_added_tokens=True)
    return max(map(len, vocab), default=1)


def model_type(folder: Path) -> str | None:
    """``model_type`` from the model folder's ``config.json``, if it says."""
    try:
        config = orjson.loads((folder / "config.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    kind = config.get("model_type") if isinstance(config, dict) else None
    return kind if isinstance(kind, str) else None


def caps_new_tokens(folder: Path) -> bool:
    """Whether the model folder's ``generation_config.json`` sets ``max_new_tokens``."""
    try:
        config = orjson.loads((folder / "generation_config.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False  # vLLM reads no cap from a missing or unreadable file either
    return isinstance(config, dict) and config.get("max_new_tokens") is not None
