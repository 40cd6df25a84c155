"""Build ttftscope's tiny random-weight Llama with the real cl100k tokenizer.

Runs INSIDE the vLLM venv (it needs torch, transformers, tokenizers and tiktoken), started by
``ttftscope.localserver_build.ensure_tiny_model``. Usage::

    python build_model.py --out DIR --ranks cl100k_base.tiktoken.gz

The output is deterministic (fixed seed). Before returning, token ids of the written
``tokenizer.json`` are checked against ``tiktoken`` built from the same rank file; any mismatch
exits non-zero so the caller never marks a wrong tokenizer as built.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import importlib
import json
import random
import sys
from pathlib import Path
from typing import Any

# tiktoken's own cl100k pattern (possessive quantifiers, Rust fancy-regex semantics).
TIKTOKEN_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# HF tokenizers (Oniguruma) reads `{1,3}+` as "one or more groups of 1-3 digits", not as a
# possessive interval, so digit runs would become one piece; a plain `{1,3}` matches tiktoken.
HF_PAT = TIKTOKEN_PAT.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")

SPECIALS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|im_start|>": 100264,  # the ids OpenAI's own ChatML variant of cl100k used
    "<|im_end|>": 100265,
    "<|endofprompt|>": 100276,
    # Hermes-style tool-call tags, at ids cl100k leaves unused: single tokens, as in real
    # tool-calling models, so vLLM's hermes tool parser sees them whole in the output.
    "<tool_call>": 100266,
    "</tool_call>": 100267,
}
VOCAB_SIZE = 100352  # covers every id above, rounded up to a multiple of 128
# ChatML with Hermes-style tools, kept beside this script (package data).
TEMPLATE_FILE = Path(__file__).with_name("chat_template.jinja")


def load_ranks(path: Path) -> dict[bytes, int]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        lines = fh.read().splitlines()
    ranks: dict[bytes, int] = {}
    for line in lines:
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by byte-level BPE vocabularies."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, (chr(c) for c in chars), strict=True))


def build_tokenizer(ranks: dict[bytes, int]) -> Any:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE

    byte_encoder = bytes_to_unicode()

    def to_str(b: bytes) -> str:
        return "".join(byte_encoder[x] for x in b)

    vocab = {to_str(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[bytes, bytes, int]] = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        local = [
            (token[:i], token[i:], rank)
            for i in range(1, len(token))
            if token[:i] in ranks and token[i:] in ranks
        ]
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    # Specials sit in the model vocab at their real ids; add_special_tokens then reuses those ids.
    vocab.update(SPECIALS)
    tok = Tokenizer(
        BPE(
            vocab,
            [(to_str(a), to_str(b)) for a, b, _ in merges],
            fuse_unk=False,
            ignore_merges=True,
        )
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(HF_PAT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in SPECIALS])
    return tok


def sample_text(seed: int = 1234) -> str:
    fixed = (
        "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n"
        "     1\timport os\n    12\tx = 1234567890 + 3.14159 * 2026-11-29\n   123\t\n"
        "It's, I'LL, we've, they'RE, she'd  double  spaces   \n\n\n  trailing \t\n"
        "Señor niño café naïve — “quotes” 日本語のテキスト 한국어 Привет мир 🤖🚀\n"
        "e\u0301 x²³ ١٢٣٤ ½ ⅷ 𝟘𝟙 ℝ\u200b\u3000full-width ＡＢＣ\n"
        "<|im_start|>user\nhi<|im_end|>\n<|endoftext|><|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>"
        '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call><tool_call></tool_call>\n'
        "< tool_call> <tool_call <tool_calls> </tool_call\n"
        '$ ls -la | grep \'^d\' && echo "done"\r\n{"k": [1, 22, 333, 4444, 55555]}\n'
    )
    rng = random.Random(seed)
    alphabet = [*"abcXYZ019 _-.,:;'\"\n\t\r/\\(){}[]<>|éßø日本🙂٣\u0301\u00a0 ", "  ", "\n\n"]
    noise = "".join(rng.choice(alphabet) for _ in range(4000))
    return fixed * 3 + noise


def verify(tok: Any, ranks: dict[bytes, int]) -> int:
    import tiktoken

    enc = tiktoken.Encoding(
        "cl100k_im", pat_str=TIKTOKEN_PAT, mergeable_ranks=ranks, special_tokens=dict(SPECIALS)
    )
    text = sample_text()
    pieces = [text, *text.split("\n")]
    for piece in pieces:
        want = enc.encode(piece, allowed_special="all")
        got = tok.encode(piece, add_special_tokens=False).ids
        if want != got:
            first = next(
                (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
                min(len(want), len(got)),
            )
            raise SystemExit(
                f"tokenizer mismatch vs tiktoken at token {first}: "
                f"tiktoken {want[first : first + 8]} hf {got[first : first + 8]} in {piece[:80]!r}"
            )
        if tok.decode(got, skip_special_tokens=False) != piece:
            raise SystemExit(f"decode does not round-trip for {piece[:80]!r}")
    return len(enc.encode(text, allowed_special="all"))


def chat_template() -> str:
    # A file's final newline is not part of the template (jinja drops it anyway).
    return TEMPLATE_FILE.read_text(encoding="utf-8").removesuffix("\n")


def write_tokenizer_files(out: Path, tok: Any) -> None:
    tok.save(str(out / "tokenizer.json"))
    added = {
        str(i): {
            "content": s,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for s, i in SPECIALS.items()
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 131072,
        "chat_template": chat_template(),
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    special_map = {
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }
    (out / "special_tokens_map.json").write_text(
        json.dumps(special_map, indent=2), encoding="utf-8"
    )


def plain_chatml(messages: list[dict[str, str]]) -> str:
    """What the template must give for a conversation without tools: plain ChatML."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def check_chat_template(out: Path) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(out))
    ids: Any = hf.apply_chat_template(
        [{"role": "user", "content": "Hi 123"}], add_generation_prompt=True, tokenize=True
    )
    if hasattr(ids, "keys"):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    if ids[0] != SPECIALS["<|im_start|>"] or SPECIALS["<|im_end|>"] not in ids:
        raise SystemExit(f"chat template renders unexpected ids: {ids}")
    if hf.eos_token_id != SPECIALS["<|im_end|>"]:
        raise SystemExit(f"eos id is {hf.eos_token_id}, expected {SPECIALS['<|im_end|>']}")
    plain = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "a\n\n b "},
    ]
    text = hf.apply_chat_template(plain, add_generation_prompt=True, tokenize=False)
    if text != plain_chatml(plain):
        raise SystemExit(f"plain conversations no longer render as ChatML: {text!r}")
    check_tool_rendering(hf)


def check_tool_rendering(hf: Any) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    call = {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "42"},
    ]
    text = hf.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    want = (
        f"<tools>\n{json.dumps(tools[0], ensure_ascii=False)}\n</tools>",
        '<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>',
        "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n",
    )
    missing = [w for w in want if w not in text]
    if missing:
        raise SystemExit(f"tool rendering lacks {missing[0]!r} in {text!r}")
    ids = hf(text, add_special_tokens=False)["input_ids"]
    for tag in ("<tool_call>", "</tool_call>"):
        if SPECIALS[tag] not in ids:
            raise SystemExit(f"{tag} is not the single token {SPECIALS[tag]} in {ids}")


def build_model(out: Path) -> int:
    # Imported by name: torch exists only in the vLLM venv this script runs in, not where
    # ttftscope itself is type-checked.
    torch: Any = importlib.import_module("torch")
    tf: Any = importlib.import_module("transformers")

    config = tf.LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=131072,
        rope_theta=1_000_000.0,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        initializer_range=0.02,
        bos_token_id=SPECIALS["<|endoftext|>"],
        eos_token_id=SPECIALS["<|im_end|>"],
        pad_token_id=SPECIALS["<|endoftext|>"],
    )
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)
    # A default output cap, as real models ship one: the random weights never say EOS, and
    # Codex sends no output limit, so without it one Codex turn would generate for hours.
    # vLLM applies it only to requests that set no limit of their own.
    tf.GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        max_new_tokens=64,
    ).save_pretrained(str(out))
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ranks", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    ranks = load_ranks(args.ranks)
    taken = set(ranks.values()) & set(SPECIALS.values())
    if taken:
        raise SystemExit(f"special ids {sorted(taken)} collide with BPE ranks")
    tok = build_tokenizer(ranks)
    n_tokens = verify(tok, ranks)
    print(f"tokenizer matches tiktoken on {n_tokens} tokens of mixed text", flush=True)
    write_tokenizer_files(args.out, tok)
    n_params = build_model(args.out)
    print(f"model written: {n_params} parameters", flush=True)
    check_chat_template(args.out)
    print("chat template ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
