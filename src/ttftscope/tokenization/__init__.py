"""Real tokenizers offline: loading, exact incremental encoding, chat-template sessions.

>>> from ttftscope.tokenization import load_tokenizer
>>> load_tokenizer("o200k_base.tiktoken.gz").encode("hello")  # doctest: +SKIP
[24912]
"""

from ttftscope.tokenization.loader import AddedTokenInfo, Tokenizer, load_tokenizer

__all__ = ["AddedTokenInfo", "Tokenizer", "load_tokenizer"]
