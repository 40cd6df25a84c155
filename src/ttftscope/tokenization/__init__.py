"""Real tokenizers offline: loading, exact incremental encoding, chat-template sessions.

Owns: tokenizer loading (``tokenizer.json``, model folders, ``.tiktoken`` rank files, GGUF
metadata), the exact incremental encoder and its window engines (``window_engines``),
chat-template sessions, and the offline fixture builder. May import ``errors`` and
``assets`` only. The public names are re-exported by :mod:`ttftscope`.
"""
