"""Chat-level variant: a ChatML conversation with a ~100K-token context grows turn by turn.

Each step appends an assistant reply and a ~1.4K-character tool result and renders with the
generation prompt. Timed, interleaved: (a) a full HF encode of the rendered prompt, (b)
``ChatSession.encode`` (render + incremental encode), (c) encoding the new turn text alone;
(b) is checked against (a) every time. Last line: one JSON object.

    python benchmarks/chat_session.py --tokenizer ~/.cache/ttftscope/tokenizers/qwen2
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from incremental_append import arg_parser, figures, resolve_tokenizer

from ttftscope.agenttext import agent_turn, build_context
from ttftscope.tokenization.chat import ChatSession
from ttftscope.tokenization.loader import load_tokenizer
from ttftscope.tokenization.textscan import common_prefix_len

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def run(path: str, turns: int, tokens: int, chars: int, template: str | None) -> dict[str, Any]:
    """Run the chat benchmark for one tokenizer; returns the summary dict."""
    tok = load_tokenizer(path)
    hf = tok.hf
    context = build_context(tokens, lambda s: len(hf.encode(s, add_special_tokens=False).ids))
    session = ChatSession(tok, template or CHATML)
    msgs: list[dict[str, str]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": context},
    ]
    session.encode(msgs)
    prev = session.last_prompt
    full_ms, inc_ms, app_ms, render_ms, mismatches = [], [], [], [], 0
    paths: dict[str, int] = {}
    for i in range(turns):
        turn = agent_turn(i, chars=chars)
        msgs += [
            {"role": "assistant", "content": f"Calling tool {i}."},
            {"role": "user", "content": turn},
        ]
        prompt = session.render(msgs)  # untimed: only to know what the new turn added
        delta = prompt[common_prefix_len(prev, prompt) :]
        t0 = time.perf_counter()
        hf.encode(delta, add_special_tokens=False)
        t1 = time.perf_counter()
        got = session.encode(msgs)
        t2 = time.perf_counter()
        session.render(msgs)
        t3 = time.perf_counter()
        want = hf.encode(prompt, add_special_tokens=False).ids
        t4 = time.perf_counter()
        prev = prompt
        mismatches += got != want
        paths[session.stats.path] = paths.get(session.stats.path, 0) + 1
        app_ms.append((t1 - t0) * 1e3)
        inc_ms.append((t2 - t1) * 1e3)
        render_ms.append((t3 - t2) * 1e3)
        full_ms.append((t4 - t3) * 1e3)
    n_tok = len(want)
    summary = figures(path, n_tok, full_ms, inc_ms, app_ms)
    return {
        **summary,
        "mismatches": mismatches,
        "bytes_per_cached_token": round(session.encoder.cached_bytes / n_tok, 2),
        "render_ms_median": round(statistics.median(render_ms), 3),
        "paths": paths,
        "template": "model" if template else "chatml",
    }


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument(
        "--model-template",
        action="store_true",
        help="use the tokenizer's own chat template instead of ChatML",
    )
    args = ap.parse_args()
    args.tokenizer = resolve_tokenizer(args.tokenizer)
    template = None
    if args.model_template:
        template = load_tokenizer(args.tokenizer).chat_template
    print(json.dumps(run(args.tokenizer, args.appends, args.tokens, args.chars, template)))


if __name__ == "__main__":
    main()
