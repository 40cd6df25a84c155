"""README.zh-CN.md stays in step with README.md.

The Chinese README translates the prose only: every fenced block (commands, flags, paths,
configuration, output samples) is byte-identical to the English one, in the same order, under
the same outline of headings, with the same links and images and the same inline code spans
(commands, flags and names in the prose; their order may change with the sentence). A change
to README.md that touches any of these fails here until the Chinese file is updated the same
way.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = ROOT / "README.md"
CHINESE = ROOT / "README.zh-CN.md"

_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^(#{1,6}) ")
# the target of a Markdown link or image: ](target)
_TARGET = re.compile(r"\]\(([^)\s]+)\)")
# an inline code span, which may wrap onto the next line of its paragraph
_SPAN = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of its opening fence) and its text."""

    line: int
    text: str


@dataclass(frozen=True)
class Outline:
    """What must match between the two READMEs, read outside and inside fences."""

    blocks: list[Block]
    heading_levels: list[int]
    targets: list[str]
    spans: Counter[str]  # inline code outside blocks, whitespace collapsed


def read_outline(text: str) -> Outline:
    """Fenced blocks (fences included); heading levels, link targets, code spans outside."""
    blocks: list[Block] = []
    levels: list[int] = []
    targets: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    start = 0
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None:
            opening = _FENCE.match(line)
            if opening:
                fence, start, lines = opening.group(1), number, [line]
                continue
            heading = _HEADING.match(line)
            if heading:
                levels.append(len(heading.group(1)))
            targets.extend(_TARGET.findall(line))
            prose.append(line)
            continue
        lines.append(line)
        if line.strip() == fence:
            blocks.append(Block(start, "\n".join(lines)))
            fence = None
    assert fence is None, f"a fenced block opened on line {start} is never closed"
    spans = Counter(" ".join(s.split()) for s in _SPAN.findall("\n".join(prose)))
    return Outline(blocks, levels, targets, spans)


@pytest.fixture(scope="module")
def english() -> Outline:
    return read_outline(ENGLISH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def chinese() -> Outline:
    return read_outline(CHINESE.read_text(encoding="utf-8"))


def test_code_blocks_are_identical_and_in_order(english: Outline, chinese: Outline) -> None:
    assert english.blocks, "README.md has no fenced blocks: is the parser broken?"
    for n, (en, zh) in enumerate(zip(english.blocks, chinese.blocks, strict=False), start=1):
        assert zh.text == en.text, (
            f"fenced block {n} differs: README.md line {en.line}, README.zh-CN.md line "
            f"{zh.line}. Update README.zh-CN.md's block {n} to match README.md's byte for "
            "byte (blocks are not translated; if README.md gained or lost a block before it, "
            "add or remove that one), then translate the prose around it."
        )
    assert len(chinese.blocks) == len(english.blocks), (
        f"README.md has {len(english.blocks)} fenced blocks, README.zh-CN.md "
        f"{len(chinese.blocks)}: add or remove the same blocks in README.zh-CN.md, in the "
        "same places."
    )


def test_same_outline_of_headings(english: Outline, chinese: Outline) -> None:
    sections = [lv for lv in english.heading_levels if lv == 2]
    assert len(sections) >= 5, "README.md has too few ## sections: is the parser broken?"
    assert chinese.heading_levels == english.heading_levels, (
        f"heading levels differ: README.md {english.heading_levels}, README.zh-CN.md "
        f"{chinese.heading_levels}. Give README.zh-CN.md the same sections (## and ###) in "
        "the same order as README.md."
    )


def test_same_links_and_images(english: Outline, chinese: Outline) -> None:
    en = [t for t in english.targets if t != CHINESE.name]
    zh = [t for t in chinese.targets if t != ENGLISH.name]
    assert zh == en, (
        f"link and image targets differ: README.md {en}, README.zh-CN.md {zh}. Keep every "
        "link and image of README.md in README.zh-CN.md, in the same order."
    )
    missing = [t for t in en if "://" not in t and not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_same_inline_code(english: Outline, chinese: Outline) -> None:
    missing = sorted((english.spans - chinese.spans).elements())
    extra = sorted((chinese.spans - english.spans).elements())
    assert not missing and not extra, (
        f"inline code differs: in README.md only {missing}, in README.zh-CN.md only {extra}. "
        "Commands, flags and names in backticks are not translated: change them in "
        "README.zh-CN.md's prose as README.md changed them."
    )


def test_each_links_to_the_other() -> None:
    head = {p.name: p.read_text(encoding="utf-8").splitlines()[:5] for p in (ENGLISH, CHINESE)}
    assert any(f"]({CHINESE.name})" in line for line in head[ENGLISH.name]), (
        "README.md lost its language switch: put `English | [中文](README.zh-CN.md)` "
        "under its title."
    )
    assert any(f"]({ENGLISH.name})" in line for line in head[CHINESE.name]), (
        "README.zh-CN.md lost its language switch: put `[English](README.md) | 中文` "
        "under its title."
    )


def test_outline_reader_sees_a_changed_block() -> None:
    # the comparisons above are only as good as the reader: a one-character change inside a
    # block shows, a heading inside a block is not one, a code span may wrap
    text = "# t\n\n## a\n\n```bash\nrun --x 1\n## not a heading\n```\n\n[l](x.md) `b\nc`\n"
    changed = read_outline(text.replace("--x 1", "--x 2"))
    original = read_outline(text)
    assert original.blocks[0].line == 5
    assert original.heading_levels == [1, 2] == changed.heading_levels
    assert original.targets == ["x.md"]
    assert original.spans == Counter({"b c": 1})
    assert original.blocks[0].text != changed.blocks[0].text
