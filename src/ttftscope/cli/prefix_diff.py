"""``ttftscope prefix-diff``: where request B stops reusing request A's prompt, and why.

Exit codes: 0 when nothing is lost, 1 when a divergence costs prefix reuse (so a pipeline can
gate on it), 2 on bad input.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ttftscope.cli.console import make_console
from ttftscope.cli.options import cli_state, config_options, dumps
from ttftscope.doctor.dynamic import DynamicValue
from ttftscope.doctor.logged_bodies import read_body, read_request_log
from ttftscope.doctor.prefix import PrefixDiff, diff_rendered, pair_diffs, render_prompt
from ttftscope.errors import ConfigError
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

__all__ = ["diff_json", "prefix_diff", "snippet"]

_SHOWN = 10  # diverging pairs listed from a log
_VISIBLE = {"\n": "↵", "\t": "→", "\r": "␍"}  # one character each: marks keep their offsets


def diff_json(diff: PrefixDiff, block_size: int, **labels: object) -> dict[str, object]:
    """One diff for ``--json``: its fields and the losses computed for ``block_size``.

    >>> from ttftscope.doctor.prefix import diff_prompts
    >>> diff_json(diff_prompts({"prompt": "a"}, {"prompt": "a b"}), 16)["lost_chars"]
    0
    """
    return {
        **labels,
        **dataclasses.asdict(diff),
        "block_size": block_size,
        "lost_chars": diff.lost_chars(),
        "lost_tokens": diff.lost_tokens(),
        "blocks_lost": diff.blocks_lost(block_size),
        "hit_rate_cost": diff.hit_rate_cost(block_size),
    }


def _costs(diff: PrefixDiff) -> bool:
    lost = diff.lost_tokens()
    return diff.diverge_char is not None and (diff.lost_chars() if lost is None else lost) > 0


def snippet(context: str, mark: tuple[int, int], style: str, width: int = 70) -> Text:
    """``context`` on one line of at most ``width`` cells, the ``mark`` span styled.

    >>> snippet("abc\\ndef", (3, 4), "bold").plain
    'abc↵def'
    """
    shown = "".join(_VISIBLE.get(c, c) for c in context)
    start, end = mark
    head = shown[max(0, start - 24) : start]
    body = shown[start : min(end, start + 30)]
    tail = shown[end : end + max(0, width - len(head) - len(body))]
    text = Text(head)
    text.append(body or "∅", style=style)  # ∅: one side ends where the other goes on
    text.append(tail)
    return text


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _carets(diff: PrefixDiff) -> str:
    """``^`` under the marked span, for output without colours (pipes, logs)."""
    start = min(diff.mark_a[0], 24)
    span = max(diff.mark_a[1] - diff.mark_a[0], diff.mark_b[1] - diff.mark_b[0], 1)
    return " " * (5 + start) + "^" * min(span, 30)


def _where(diff: PrefixDiff) -> str:
    token = "" if diff.shared_tokens is None else f" (token {diff.shared_tokens:,})"
    how = "chat template" if diff.rendering == "chat_template" else "canonical JSON"
    return f"diverges at char {diff.diverge_char:,}{token}, rendered as {how}"


def _lost(diff: PrefixDiff, block_size: int) -> str:
    lost, blocks, cost = (
        diff.lost_tokens(),
        diff.blocks_lost(block_size),
        diff.hit_rate_cost(block_size),
    )
    if lost is None or blocks is None or cost is None:
        return (
            f"lost: {diff.lost_chars():,} of {diff.reusable_chars:,} reusable characters\n"
            "  (pass --tokenizer, or set tokenizer.path, for tokens and KV blocks)"
        )
    return (
        f"lost: {lost:,} of {diff.reusable_tokens or 0:,} reusable tokens, "
        f"{_plural(blocks, 'KV block')} of {block_size}\n"
        f"  cost: {cost:.1%} of B's prompt tokens could have hit the prefix cache and did not"
    )


def print_diff(console: Console, diff: PrefixDiff, block_size: int, a: str, b: str) -> None:
    """The divergence of one pair: where, both snippets, what changed, what it costs."""
    sizes = [f"{diff.chars_a:,} chars", f"{diff.chars_b:,} chars"]
    if diff.tokens_a is not None and diff.tokens_b is not None:
        sizes = [f"{sizes[0]}, {diff.tokens_a:,} tokens", f"{sizes[1]}, {diff.tokens_b:,} tokens"]
    console.print(f"A: {escape(a)} ({sizes[0]})\nB: {escape(b)} ({sizes[1]})")
    if diff.diverge_char is None:
        reused = f"{diff.reusable_chars:,} reusable characters"
        if diff.reusable_tokens is not None:
            reused += f" ({diff.reusable_tokens:,} tokens)"
        console.print(f"[green]no divergence:[/green] B starts with all {reused} of A")
        return
    console.print(_where(diff))
    console.print(Text("  A …").append(snippet(diff.context_a, diff.mark_a, "reverse red")))
    console.print(Text("  B …").append(snippet(diff.context_b, diff.mark_b, "reverse green")))
    console.print(_carets(diff), style="red")
    for value in diff.dynamic:
        console.print(_changed(value))
    if not diff.dynamic:
        console.print("changed: nothing recognisable (an edit, not a dynamic value)")
    console.print(_lost(diff, block_size))


def _changed(value: DynamicValue) -> str:
    """One changed value; the values on their own line when both would not fit in 80."""
    before, after = (_short(repr(v)) for v in (value.before, value.after))
    head = f"changed: [bold]{value.kind}[/bold] at char {value.char:,}"
    line = f"{head}: {escape(before)} → {escape(after)}"
    if len(f"changed: {value.kind} at char {value.char:,}: {before} → {after}") <= 80:
        return line
    return f"{head}\n  {escape(before)}\n  → {escape(after)}"


def _short(text: str, width: int = 74) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _tokenizer(path: Path | None) -> Tokenizer | None:
    return None if path is None else load_tokenizer(path)


def _two_files(paths: Sequence[Path], tok: Tokenizer | None) -> PrefixDiff:
    a, b = (read_body(p) for p in paths)
    return diff_rendered(render_prompt(a, tok), render_prompt(b, tok))


@dataclasses.dataclass(frozen=True)
class _LogDiffs:
    """Every conversation pair of a log as (line of A, line of B, diff); what was read."""

    pairs: list[tuple[int, int, PrefixDiff]]
    requests: int
    skipped_lines: tuple[int, ...]


def _log_diffs(path: Path, tok: Tokenizer | None) -> _LogDiffs:
    """Every conversation pair of the log, diffed."""
    log = read_request_log(path)
    if not log.bodies:
        skipped = f" ({_plural(log.skipped, 'line')} skipped)" if log.skipped else ""
        raise ConfigError(
            f"{path} holds no request bodies{skipped}",
            hint="a request log has one OpenAI request body per line (JSONL); for two bodies "
            "in two JSON files, pass both files",
        )
    diffs = [(log.lines[i], log.lines[j], d) for (i, j), d in pair_diffs(log.bodies, tok)]
    return _LogDiffs(diffs, len(log.bodies), log.skipped_lines)


def _weight(diff: PrefixDiff) -> int:
    lost = diff.lost_tokens()
    return diff.lost_chars() if lost is None else lost


def _summary_table(diffs: Sequence[tuple[int, int, PrefixDiff]], block_size: int) -> Table:
    table = Table(box=None, pad_edge=False)
    for name in ("A → B (lines)", "diverges at", "lost", "blocks", "what changed"):
        table.add_column(name, justify="right" if name in {"lost", "blocks"} else "left")
    for line_a, line_b, diff in diffs[:_SHOWN]:
        at = f"char {diff.diverge_char:,}"
        if diff.shared_tokens is not None:
            at += f", tok {diff.shared_tokens:,}"
        blocks = diff.blocks_lost(block_size)
        kinds = ", ".join(sorted({v.kind for v in diff.dynamic})) or "an edit"
        lost = f"{_weight(diff):,}" + (" ch" if diff.lost_tokens() is None else "")
        table.add_row(
            f"{line_a} → {line_b}", at, lost, "-" if blocks is None else str(blocks), kinds
        )
    return table


def _print_log(
    console: Console,
    path: Path,
    found: _LogDiffs,
    block_size: int,
) -> None:
    diffs, count, skipped = found.pairs, found.requests, found.skipped_lines
    costly = sorted((d for d in diffs if _costs(d[2])), key=lambda d: -_weight(d[2]))
    note = f", {_plural(len(skipped), 'line')} skipped" if skipped else ""
    console.print(
        f"{escape(str(path))}: {count} requests{note}, {len(diffs)} conversation pairs, "
        f"{len(costly)} losing reuse"
    )
    if not costly:
        return
    console.print(_summary_table(costly, block_size))
    first = min(costly, key=lambda d: d[0:2])
    shown = [("worst", costly[0])] + ([("first", first)] if first is not costly[0] else [])
    for title, (line_a, line_b, diff) in shown:
        console.print(f"\n[bold]{title}:[/bold]")
        print_diff(console, diff, block_size, f"line {line_a}", f"line {line_b}")


@click.command("prefix-diff")
@click.argument(
    "files", metavar="A B | LOG.jsonl", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--tokenizer",
    "tokenizer_path",
    type=click.Path(path_type=Path),
    help="Tokenizer (model dir, tokenizer.json) whose chat template renders the prompts "
    "[default: tokenizer.path; else canonical JSON, no token counts]",
)
@click.option(
    "--block-size",
    type=click.IntRange(1, 1 << 20),
    default=16,
    show_default=True,
    help="KV cache block size in tokens (vLLM's --block-size)",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text")
@config_options
@click.pass_context
def prefix_diff(
    ctx: click.Context,
    files: tuple[Path, ...],
    tokenizer_path: Path | None,
    block_size: int,
    as_json: bool,
) -> None:
    """Compare two request bodies (A B), or every pair of consecutive requests of one
    conversation in a JSONL request log: where the rendered prompts diverge, which dynamic
    values (timestamps, ids, counters, reordered tool keys) changed, and the prefix-cache
    reuse lost. Exit code 1 when a divergence loses reuse."""
    if len(files) > 2:
        raise ConfigError(
            f"prefix-diff takes two request files or one log, not {len(files)} files",
            hint="run `ttftscope prefix-diff A.json B.json` or "
            "`ttftscope prefix-diff requests.jsonl`",
        )
    path = tokenizer_path or cli_state(ctx).load().settings.tokenizer.path
    tok = _tokenizer(path)
    costly = _two(files, tok, block_size, as_json) if len(files) == 2 else None
    if costly is None:
        costly = _log(files[0], tok, block_size, as_json)
    # sys.exit, not ctx.exit: main() runs click with standalone_mode=False, which returns
    # ctx.exit's code instead of exiting with it
    sys.exit(1 if costly else 0)


def _two(files: Sequence[Path], tok: Tokenizer | None, block_size: int, as_json: bool) -> bool:
    """Diff and print two body files; whether the divergence costs reuse."""
    diff = _two_files(files, tok)
    if as_json:
        click.echo(dumps(diff_json(diff, block_size, a=str(files[0]), b=str(files[1]))))
    else:
        print_diff(make_console(), diff, block_size, str(files[0]), str(files[1]))
    return _costs(diff)


def _log(path: Path, tok: Tokenizer | None, block_size: int, as_json: bool) -> bool:
    """Diff and print every conversation pair of a log; whether any divergence costs reuse."""
    found = _log_diffs(path, tok)
    if as_json:
        pairs = [diff_json(d, block_size, line_a=a, line_b=b) for a, b, d in found.pairs]
        doc: Mapping[str, object] = {
            "file": str(path),
            "requests": found.requests,
            "skipped_lines": list(found.skipped_lines),
            "pairs": pairs,
        }
        click.echo(dumps(doc))
    else:
        _print_log(make_console(), path, found, block_size)
    return any(_costs(d) for _, _, d in found.pairs)
