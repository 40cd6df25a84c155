"""Real tokenizers offline: loading, exact incremental encoding, chat-template sessions.

The encoder and chat classes load on first use, so ``load_tokenizer`` (and the fixture
builder) never depends on the Jinja/session machinery being importable.

>>> from ttftscope.tokenization import load_tokenizer
>>> load_tokenizer("o200k_base.tiktoken.gz").encode("hello")  # doctest: +SKIP
[24912]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ttftscope.tokenization.loader import AddedTokenInfo, Tokenizer, load_tokenizer

if TYPE_CHECKING:
    from ttftscope.tokenization.chat import ChatSession
    from ttftscope.tokenization.incremental import EncoderStats, IncrementalEncoder

_LAZY = {"ChatSession": "chat", "EncoderStats": "incremental", "IncrementalEncoder": "incremental"}

__all__ = [
    "AddedTokenInfo",
    "ChatSession",
    "EncoderStats",
    "IncrementalEncoder",
    "Tokenizer",
    "load_tokenizer",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"ttftscope.tokenization.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'ttftscope.tokenization' has no attribute {name!r}")
