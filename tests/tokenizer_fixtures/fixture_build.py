"""Converters behind :mod:`~tests.tokenizer_fixtures.fixtures`: package files → tokenizer.json.

Each builder returns a :class:`Built`: the tokenizer document, an optional
``tokenizer_config.json``, and what to verify it against (a reference encoder from the
vocabulary's own library, and/or llama.cpp's ``.inp``/``.out`` vectors). transformers,
sentencepiece and mistral_common are dev-only and imported inside the functions that need them.

The examples here need the downloaded packages and take seconds to minutes, so they are
literal blocks, not run as tests::

    build_tiktoken("cl100k").doc["model"]["type"]  # 'BPE'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.tokenizer_fixtures.gguf_meta import read_gguf_metadata
from ttftscope.assets import package_file
from ttftscope.errors import TokenizerError
from ttftscope.tokenization.tiktoken_convert import (
    TiktokenSpec,
    ranks_to_tokenizer_json,
    read_rank_file,
    recognise,
)

OPENAI_WHEEL = ("bpe-openai", "0.1.4")
WHISPER_SDIST = ("openai-whisper", "20250625")
MISTRAL_WHEEL = ("mistral-common", "1.13.1")
LLAMA_CPP_SDIST = ("llama-cpp-python", "0.3.36")

TIKTOKEN_SOURCES: dict[str, tuple[tuple[str, str], str, bool]] = {
    "o200k": (OPENAI_WHEEL, "bpe_openai/data/o200k_base.tiktoken.gz", False),
    "cl100k": (OPENAI_WHEEL, "bpe_openai/data/cl100k_base.tiktoken.gz", False),
    "gpt2": (WHISPER_SDIST, "whisper/assets/gpt2.tiktoken", True),
}
SPM_SOURCES = {
    "mistral_v1": "mistral_common/data/tokenizer.model.v1",
    "mistral_v3": "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
}
GGUF_SOURCES = {
    "llama3": "llama-bpe",
    "qwen2": "qwen2",
    "llama2": "llama-spm",
    "gpt2_gguf": "gpt-2",
}
TEKKEN_MEMBER = "mistral_common/data/tekken_240911.json"

# Generic ChatML (what OpenAI-compatible servers commonly apply for these vocabularies); the
# markers are plain text here because cl100k_base/o200k_base have no <|im_start|> token.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Meta-Llama-3-8B-Instruct's tokenizer_config.json template, verbatim.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] "
    "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
# Mistral-7B-Instruct-v0.1's template ([INST] turns; BOS once, EOS after each answer).
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and "
    "assistant roles are supported!') }}{% endif %}{% endfor %}"
)
# Qwen2-Instruct's ChatML template (the GGUF's own copy is Qwen1.5's, without the period).
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

Encoder = Callable[[str], list[int]]


@dataclass
class Built:
    """A converted tokenizer and what it must agree with before it is marked done.

    >>> Built(doc={}).vectors
    []
    """

    doc: dict[str, Any]
    config: dict[str, Any] | None = None
    reference: Encoder | None = None
    reference_name: str = ""
    vectors: list[tuple[str, list[int]]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def _config(template: str | None, bos: str | None, eos: str | None, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        **extra,
    }
    if template is not None:
        cfg["chat_template"] = template
    return cfg


def _tiktoken_source(family: str) -> tuple[dict[bytes, int], TiktokenSpec, str]:
    (pkg, version), member, sdist = TIKTOKEN_SOURCES[family]
    path = package_file(pkg, version, member, sdist=sdist)
    ranks, digest = read_rank_file(path)
    return ranks, recognise(path, ranks, digest), f"{pkg}=={version}:{member}"


def tiktoken_reference(family: str) -> tuple[Encoder, str]:
    """``tiktoken.Encoding`` built offline from the family's rank file (specials allowed).

    Example::

        tiktoken_reference("cl100k")[0]("hello world")  # [15339, 1917]
    """
    import tiktoken

    ranks, spec, _ = _tiktoken_source(family)
    enc = tiktoken.Encoding(
        spec.name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=spec.special_tokens
    )

    def reference(text: str) -> list[int]:
        return list(enc.encode(text, allowed_special="all"))

    return reference, f"tiktoken {tiktoken.__version__} ({spec.name})"


def build_tiktoken(family: str) -> Built:
    """o200k / cl100k / gpt2 from their rank files, checked against ``tiktoken.Encoding``.

    Example::

        build_tiktoken("gpt2").reference_name  # 'tiktoken 0.x (r50k_base)'
    """
    ranks, spec, source = _tiktoken_source(family)
    doc = ranks_to_tokenizer_json(ranks, spec.pat_str, spec.special_tokens)
    reference, ref_name = tiktoken_reference(family)
    template = None if family == "gpt2" else CHATML_TEMPLATE
    return Built(
        doc=doc,
        config=_config(template, None, "<|endoftext|>"),
        reference=reference,
        reference_name=ref_name,
        sources=[source],
    )


def _tekken_specials(n_special: int) -> dict[str, int]:
    try:
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        names = [
            str(getattr(t["token_str"], "value", t["token_str"]))
            for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS
        ]
    except ImportError:  # the same list, for machines without mistral_common
        names = [
            "<unk>",
            "<s>",
            "</s>",
            "[INST]",
            "[/INST]",
            "[AVAILABLE_TOOLS]",
            "[/AVAILABLE_TOOLS]",
            "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]",
            "[TOOL_CALLS]",
            "[IMG]",
            "<pad>",
            "[IMG_BREAK]",
            "[IMG_END]",
            "[PREFIX]",
            "[MIDDLE]",
            "[SUFFIX]",
            "[SYSTEM_PROMPT]",
            "[/SYSTEM_PROMPT]",
            "[TOOL_CONTENT]",
        ]
    names += [f"<SPECIAL_{i}>" for i in range(len(names), n_special)]
    return {name: i for i, name in enumerate(names)}


def _tekken_source() -> tuple[dict[bytes, int], str, int, Path]:
    import base64

    path = package_file(*MISTRAL_WHEEL, TEKKEN_MEMBER)
    data = json.loads(path.read_text(encoding="utf-8"))
    cfg = data["config"]
    n_special = int(cfg["default_num_special_tokens"])
    inner = int(cfg["default_vocab_size"]) - n_special  # tekken truncates the vocab to this
    ranks = {base64.b64decode(t["token_bytes"]): int(t["rank"]) for t in data["vocab"][:inner]}
    return ranks, str(cfg["pattern"]), n_special, path


def build_tekken() -> Built:
    """Mistral tekken: tiktoken-style ranks shifted up by the reserved special-token block.

    Example::

        build_tekken().doc["added_tokens"][1]["content"]  # '<s>'
    """
    ranks, pattern, n_special, _ = _tekken_source()
    doc = ranks_to_tokenizer_json(ranks, pattern, _tekken_specials(n_special), id_offset=n_special)
    reference, ref_name = tekken_reference()
    return Built(
        doc=doc,
        config=_config(None, "<s>", "</s>"),
        reference=reference,
        reference_name=ref_name,
        sources=[f"mistral-common=={MISTRAL_WHEEL[1]}:{TEKKEN_MEMBER}"],
    )


def tekken_reference() -> tuple[Encoder, str]:
    """mistral_common's ``Tekkenizer`` when installed, else tiktoken with the id offset.

    Example::

        tekken_reference()[0]("Hello")  # [22177]
    """
    try:
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    except ImportError:
        import tiktoken

        ranks, pattern, n_special, _ = _tekken_source()
        enc = tiktoken.Encoding("tekken", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        return (
            lambda text: [t + n_special for t in enc.encode_ordinary(text)],
            "tiktoken with the tekken id offset",
        )
    tek = Tekkenizer.from_file(str(package_file(*MISTRAL_WHEEL, TEKKEN_MEMBER)))
    return (
        lambda text: list(tek.encode(text, bos=False, eos=False)),
        f"mistral_common {MISTRAL_WHEEL[1]} Tekkenizer",
    )


def _legacy_spm_layout(doc: dict[str, Any], bos: str, bos_id: int) -> None:
    """The Llama-2 / Mistral ``tokenizer.json`` layout (``legacy=True``), as their repos ship."""
    doc["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    }
    doc["pre_tokenizer"] = None
    doc["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    }
    doc["model"].update(byte_fallback=True, fuse_unk=True, unk_token="<unk>")
    doc["post_processor"] = _bos_processor(bos, bos_id)


def _bos_processor(bos: str, bos_id: int) -> dict[str, Any]:
    tok = {"SpecialToken": {"id": bos, "type_id": 0}}
    return {
        "type": "TemplateProcessing",
        "single": [tok, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            tok,
            {"Sequence": {"id": "A", "type_id": 0}},
            tok,
            {"Sequence": {"id": "B", "type_id": 0}},
        ],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }


def _convert_vocab_dict(architecture: str, tokenizer_dict: dict[str, Any]) -> dict[str, Any]:
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    hf, _ = convert_gguf_tokenizer(architecture, tokenizer_dict)
    doc: dict[str, Any] = json.loads(hf.to_str())
    return doc


def build_spm(family: str) -> Built:
    """Mistral v1/v3 SentencePiece BPE, checked against ``SentencePieceProcessor``.

    Example::

        build_spm("mistral_v1").doc["normalizer"]["normalizers"][0]["type"]  # 'Prepend'
    """
    from sentencepiece import sentencepiece_model_pb2

    member = SPM_SOURCES[family]
    path = package_file(*MISTRAL_WHEEL, member)
    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(path.read_bytes())
    # SentencePiece piece types use llama.cpp's numbering (1 normal, 3 control, 6 byte, ...).
    vocab = {
        "tokenizer_type": "llama",
        "tokens": [p.piece for p in proto.pieces],
        "scores": [p.score for p in proto.pieces],
        "token_type": [int(p.type) for p in proto.pieces],
    }
    doc = _convert_vocab_dict("llama", vocab)
    _legacy_spm_layout(doc, "<s>", vocab["tokens"].index("<s>"))
    reference, ref_name = spm_reference(family)
    return Built(
        doc=doc,
        config=_config(MISTRAL_TEMPLATE, "<s>", "</s>", add_bos_token=True, legacy=True),
        reference=reference,
        reference_name=ref_name,
        sources=[f"mistral-common=={MISTRAL_WHEEL[1]}:{member}"],
    )


def spm_reference(family: str) -> tuple[Encoder, str]:
    """``SentencePieceProcessor.encode`` (dummy prefix included, no BOS) for a .model family.

    Example::

        spm_reference("mistral_v1")[0]("Hello")  # [23325]
    """
    import sentencepiece as spm

    path = package_file(*MISTRAL_WHEEL, SPM_SOURCES[family])
    proc = spm.SentencePieceProcessor(model_file=str(path))
    return (lambda text: list(proc.encode(text))), f"sentencepiece {spm.__version__}"


def read_gguf_vocab(path: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(architecture, tokenizer_dict, metadata)`` of a GGUF, without torch or ``gguf``.

    transformers' own reader imports torch; this builds the same dict its converter expects.

    Example::

        read_gguf_vocab(Path("ggml-vocab-qwen2.gguf"))[0]  # 'qwen2'
    """
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING

    meta = read_gguf_metadata(path)
    tok = {
        name: meta[f"tokenizer.{key}"]
        for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
        if f"tokenizer.{key}" in meta
    }
    return str(meta["general.architecture"]), tok, meta


def read_vectors(family: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test vectors beside a GGUF vocab: texts, and the reference HF ids of each.

    Example::

        len(read_vectors("qwen2"))  # 46
    """
    stem = f"vendor/llama.cpp/models/ggml-vocab-{GGUF_SOURCES[family]}.gguf"
    inp = package_file(*LLAMA_CPP_SDIST, stem + ".inp", sdist=True).read_text(encoding="utf-8")
    out = package_file(*LLAMA_CPP_SDIST, stem + ".out", sdist=True).read_text(encoding="utf-8")
    texts = inp.split("\n__ggml_vocab_test__\n")[:-1]  # every test ends with the marker line
    ids = [[int(x) for x in line.split()] for line in out.split("\n")[:-1]]
    if len(texts) != len(ids):
        raise TokenizerError(
            f"{stem}: {len(texts)} test texts but {len(ids)} id lines",
            hint="the llama.cpp vector format changed: pin the sdist version",
        )
    return list(zip(texts, ids, strict=True))


def build_gguf(family: str) -> Built:
    """Llama 3 / Qwen2 / Llama 2 from llama.cpp's vocab-only GGUFs, with the known fixes.

    Example::

        build_gguf("llama3").doc["model"]["ignore_merges"]  # True
    """
    member = f"vendor/llama.cpp/models/ggml-vocab-{GGUF_SOURCES[family]}.gguf"
    arch, vocab, meta = read_gguf_vocab(package_file(*LLAMA_CPP_SDIST, member, sdist=True))
    doc = _convert_vocab_dict(arch, vocab)
    tokens = vocab["tokens"]

    def token(key: str) -> str | None:
        tid = meta.get(f"tokenizer.ggml.{key}")
        return str(tokens[tid]) if tid is not None else None

    bos, eos = token("bos_token_id"), token("eos_token_id")
    template: str | None = None
    if family == "llama3":
        doc["model"]["ignore_merges"] = True  # Meta's tokenizer.json has it; GGUF lacks it
        doc["post_processor"] = _bos_processor("<|begin_of_text|>", 128000)
        template, eos = LLAMA3_TEMPLATE, "<|eot_id|>"  # as in the Instruct model's config
    elif family == "qwen2":
        doc["normalizer"] = {"type": "NFC"}  # Qwen2's tokenizer.json normalizes; GGUF lacks it
        template, eos = QWEN2_TEMPLATE, "<|im_end|>"  # as in Qwen2-Instruct's config
        bos = None  # Qwen2 has no BOS; the GGUF's bos id is only a placeholder
    elif family == "llama2":
        _legacy_spm_layout(doc, "<s>", tokens.index("<s>"))
    return Built(
        doc=doc,
        config=_config(template, bos, eos, add_bos_token=family != "qwen2"),
        vectors=read_vectors(family),
        reference_name="llama.cpp test vectors",
        sources=[f"llama-cpp-python=={LLAMA_CPP_SDIST[1]}:{member}"],
    )
