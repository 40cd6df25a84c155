"""Expected prompt ids made without the gateway's code: transformers renders the model folder's
chat template (as vLLM does), ``tokenizers`` encodes the text, as a server tokenizes a rendered
chat prompt (no added BOS/EOS)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tokenizers
from transformers.utils import chat_template_utils


def _token_text(value: Any) -> str:
    """``bos_token``/``eos_token`` as tokenizer_config.json writes them: text or an object."""
    if isinstance(value, Mapping):
        return str(value.get("content") or "")
    return str(value or "")


def reference_prompt(
    model_dir: Path,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> str:
    """The prompt transformers renders from ``model_dir``'s chat template (``template_kwargs``:
    its other variables, as ``chat_template_kwargs``)."""
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    rendered: Any = chat_template_utils.render_jinja_template(
        conversations=[[dict(m) for m in messages]],
        chat_template=config["chat_template"],
        add_generation_prompt=add_generation_prompt,
        bos_token=_token_text(config.get("bos_token")),
        eos_token=_token_text(config.get("eos_token")),
        **template_kwargs,
    )
    return str(rendered[0][0])  # (prompts, generation indices): the one prompt


def reference_ids(
    model_dir: Path,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> list[int]:
    """A full encode of :func:`reference_prompt` by the model folder's ``tokenizer.json``."""
    prompt = reference_prompt(
        model_dir, messages, add_generation_prompt=add_generation_prompt, **template_kwargs
    )
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return list(tok.encode(prompt, add_special_tokens=False).ids)
