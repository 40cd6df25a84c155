"""Load a real tokenizer from a file or folder into one small wrapper over HF ``tokenizers``.

Accepted: a ``tokenizer.json``; a model folder holding one (plus optional
``tokenizer_config.json`` / ``chat_template.jinja``); a ``.tiktoken`` / ``.tiktoken.gz`` rank
file (converted once, cached under ``cache_dir()/tokenizers/converted``).

>>> tok = load_tokenizer(cl100k_dir)  # e.g. "~/.cache/ttftscope/tokenizers/cl100k"
>>> tok.encode("hello world")
[15339, 1917]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers

from ttftscope.assets import cache_dir
from ttftscope.errors import TokenizerError
from ttftscope.tokenization.tiktoken_convert import convert_rank_file

__all__ = ["AddedTokenInfo", "Tokenizer", "load_tokenizer"]


@dataclass(frozen=True, slots=True)
class AddedTokenInfo:
    """One added (usually special) token, as ``tokenizer.json`` records it.

    >>> AddedTokenInfo("<|im_end|>", 7, special=True).content
    '<|im_end|>'
    """

    content: str
    id: int
    special: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False
    single_word: bool = False


class Tokenizer:
    """A loaded tokenizer: ``hf`` does the work, the rest is what templates and sessions need.

    >>> t = Tokenizer(tokenizers.Tokenizer(tokenizers.models.BPE()), Path("x"), "x")
    >>> t.encode("")
    []
    """

    def __init__(
        self,
        hf: tokenizers.Tokenizer,
        path: Path,
        name: str,
        *,
        chat_template: str | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
    ) -> None:
        self.hf = hf
        self.path = path
        self.name = name
        self.chat_template = chat_template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.added_tokens = _added_tokens(hf)

    def __repr__(self) -> str:
        return f"Tokenizer(name={self.name!r}, path={str(self.path)!r})"

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; special-token text in ``text`` becomes its special id.

        ``add_special_tokens`` applies the post-processor (e.g. a BOS for Llama-style models).

        >>> cl100k_tok.encode("hi there")  # cl100k_tok = load_tokenizer(<cl100k folder>)
        [6151, 1070]
        """
        ids: list[int] = self.hf.encode(text, add_special_tokens=add_special_tokens).ids
        return ids

    def encode_with_offsets(
        self, text: str, *, add_special_tokens: bool = False
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and the ``(start, end)`` character span of ``text`` each id came from.

        Tokens holding part of a multi-byte character all point at that whole character;
        tokens the post-processor adds have the empty span ``(0, 0)``.

        >>> cl100k_tok.encode_with_offsets("hi there")
        ([6151, 1070], [(0, 2), (2, 8)])
        """
        enc = self.hf.encode(text, add_special_tokens=add_special_tokens)
        return list(enc.ids), [(int(s), int(e)) for s, e in enc.offsets]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens included.

        >>> cl100k_tok.decode([6151, 1070])
        'hi there'
        """
        text: str = self.hf.decode(list(ids), skip_special_tokens=False)
        return text

    def token_to_id(self, token: str) -> int | None:
        """Id of a vocabulary or added token string, or None.

        >>> cl100k_tok.token_to_id("<|endoftext|>"), cl100k_tok.token_to_id("no such token")
        (100257, None)
        """
        tid: int | None = self.hf.token_to_id(token)
        return tid

    def to_json(self) -> dict[str, Any]:
        """The full ``tokenizer.json`` document (normalizer, pre_tokenizer, model, added_tokens).

        >>> bare = Tokenizer(tokenizers.Tokenizer(tokenizers.models.BPE()), Path("x"), "x")
        >>> bare.to_json()["model"]["type"]
        'BPE'
        """
        doc: dict[str, Any] = json.loads(self.hf.to_str())
        return doc


def _added_tokens(hf: tokenizers.Tokenizer) -> list[AddedTokenInfo]:
    infos = []
    for tid, tok in sorted(hf.get_added_tokens_decoder().items()):
        infos.append(
            AddedTokenInfo(
                content=tok.content,
                id=int(tid),
                special=bool(tok.special),
                lstrip=bool(tok.lstrip),
                rstrip=bool(tok.rstrip),
                normalized=bool(tok.normalized),
                single_word=bool(tok.single_word),
            )
        )
    return infos


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a ``tokenizer.json``, a model folder, or a ``.tiktoken[.gz]`` rank file.

    >>> from ttftscope import load_tokenizer
    >>> tok = load_tokenizer(cl100k_dir / "tokenizer.json")  # or the folder, or a .tiktoken
    >>> tok.encode("hello world"), tok.decode([15339, 1917])
    ([15339, 1917], 'hello world')
    >>> load_tokenizer("/nope")
    Traceback (most recent call last):
    ...
    ttftscope.TokenizerError: tokenizer path /nope does not exist...
    """
    try:
        return _load_path(Path(path).expanduser())
    except (OSError, RuntimeError) as exc:  # a name too long, no permission, "~nosuchuser"
        shown = str(path) if len(str(path)) <= 120 else str(path)[:117] + "..."
        raise TokenizerError(
            f"cannot read the tokenizer at {shown}: {getattr(exc, 'strerror', None) or exc}",
            hint="check the path and its permissions",
        ) from None


def _load_path(p: Path) -> Tokenizer:
    if not p.exists():
        raise TokenizerError(
            f"tokenizer path {p} does not exist",
            hint="pass a tokenizer.json, a model folder containing one, or a .tiktoken file",
        )
    if p.is_dir():
        return _load_dir(p)
    if p.name.endswith((".tiktoken", ".tiktoken.gz")):
        return _load_tiktoken(p)
    if p.suffix == ".json":
        config_dir = p.parent if p.name == "tokenizer.json" else None
        name = p.parent.name if p.name == "tokenizer.json" else p.stem
        return _from_json_file(p, name, config_dir)
    raise TokenizerError(
        f"unsupported tokenizer file {p.name} (at {p.parent})",
        hint="supported: tokenizer.json, a folder with tokenizer.json, *.tiktoken, "
        "*.tiktoken.gz; convert SentencePiece/GGUF files to tokenizer.json first (with "
        "transformers: AutoTokenizer.from_pretrained(...).save_pretrained(DIR))",
    )


def _load_dir(folder: Path) -> Tokenizer:
    tj = folder / "tokenizer.json"
    if tj.is_file():
        return _from_json_file(tj, folder.name, folder)
    rank_files = sorted(folder.glob("*.tiktoken")) + sorted(folder.glob("*.tiktoken.gz"))
    if len(rank_files) == 1:
        return _load_tiktoken(rank_files[0])
    present = ", ".join(sorted(q.name for q in folder.iterdir())[:10]) or "nothing"
    raise TokenizerError(
        f"{folder} has no tokenizer.json (found: {present})",
        hint="point at a folder saved by transformers/tokenizers, or at the tokenizer file itself",
    )


def _from_json_file(path: Path, name: str, config_dir: Path | None) -> Tokenizer:
    try:
        hf = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for bad JSON or schema
        raise TokenizerError(
            f"cannot load {path} as a tokenizers tokenizer.json: {str(exc)[:300]}",
            hint="the file must be a tokenizer.json written by HF tokenizers (>= 0.19)",
        ) from exc
    config = _read_config(config_dir) if config_dir is not None else {}
    template = _read_template(config_dir, config) if config_dir is not None else None
    return Tokenizer(
        hf,
        path,
        name,
        chat_template=template,
        bos_token=_token_str(config.get("bos_token")),
        eos_token=_token_str(config.get("eos_token")),
    )


def _read_config(folder: Path) -> dict[str, Any]:
    cfg = folder / "tokenizer_config.json"
    if not cfg.is_file():
        return {}
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TokenizerError(
            f"cannot read {cfg}: {exc}", hint="fix or delete the file (it is optional)"
        ) from exc
    if not isinstance(data, dict):
        raise TokenizerError(f"{cfg} is not a JSON object", hint="fix or delete the file")
    return data


def _read_template(folder: Path, config: dict[str, Any]) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():  # transformers >= 4.43 saves the template here and prefers it
        try:
            return jinja.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerError(
                f"cannot read {jinja}: {exc}", hint="fix or delete the file (it is optional)"
            ) from exc
    tmpl = config.get("chat_template")
    if isinstance(tmpl, list):  # named templates: [{"name": "default", "template": "..."}]
        named = {t.get("name"): t.get("template") for t in tmpl if isinstance(t, dict)}
        tmpl = named.get("default", next(iter(named.values()), None))
    return tmpl if isinstance(tmpl, str) else None


def _token_str(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _load_tiktoken(path: Path) -> Tokenizer:
    json_path, spec = convert_rank_file(path, cache_dir() / "tokenizers" / "converted")
    try:
        hf = tokenizers.Tokenizer.from_file(str(json_path))
    except Exception as exc:  # a corrupt cache entry: say where it is so it can be deleted
        raise TokenizerError(
            f"cached conversion {json_path} of {path} is unreadable: {str(exc)[:200]}",
            hint=f"delete {json_path} and load again",
        ) from exc
    eos = "<|endoftext|>" if "<|endoftext|>" in spec.special_tokens else None
    return Tokenizer(hf, path, spec.name, eos_token=eos)
