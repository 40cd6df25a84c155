"""The folders of a result path that may hold runs: the path and its subfolders.

The README writes a probe into ``results/`` and a bench into ``results/run1``; ``report
results/`` and ``doctor --records results/`` read both. Subfolders are read to
:data:`MAX_DEPTH` levels below the path given, at most :data:`MAX_FOLDERS` of them, hidden
ones (``.git``, ``.venv``) never; what holds results but lies beyond either bound is named in
one line, never dropped unsaid.

>>> import tempfile; root = Path(tempfile.mkdtemp())
>>> (root / "run1").mkdir(); (root / ".git").mkdir()
>>> [p.name for p in result_folders(root).found][1:], result_folders(root).skipped
(['run1'], ())
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 3  # results/<experiment>/<run>/<shard folder>
MAX_FOLDERS = 256


@dataclass(frozen=True)
class Folders:
    """The folders to read, breadth first (the path itself first), and what was not read."""

    found: tuple[Path, ...]
    skipped: tuple[str, ...] = ()


def result_folders(root: Path) -> Folders:
    """``root`` and its subfolders to :data:`MAX_DEPTH` levels, with a line per bound hit."""
    found: list[Path] = []
    deep: list[Path] = []
    over: list[Path] = []
    seen: set[Path] = set()
    queue = [(root, 0)]
    while queue:
        folder, depth = queue.pop(0)
        if folder.resolve() in seen:  # a symlink back up the tree
            continue
        seen.add(folder.resolve())
        if len(found) >= MAX_FOLDERS:
            over.append(folder)
            continue
        found.append(folder)
        for sub in _subfolders(folder):
            if depth + 1 > MAX_DEPTH:
                deep.append(sub)
            else:
                queue.append((sub, depth + 1))
    return Folders(tuple(found), _skipped(root, deep, over))


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:  # unreadable: nothing below it is read, as with any unreadable file
        return []


def holds_results(folder: Path) -> bool:
    """Whether ``folder`` holds files a probe or bench writes (records, summaries).

    >>> holds_results(Path("/nonexistent"))
    False
    """
    try:
        return any(folder.glob("*.jsonl")) or any(folder.glob("bench-summary*.json"))
    except OSError:
        return False


def _skipped(root: Path, deep: list[Path], over: list[Path]) -> tuple[str, ...]:
    lines = []
    deep = [p for p in deep if holds_results(p)]
    over = [p for p in over if holds_results(p)]
    if deep:
        lines.append(
            f"{root}: not read: {_some(root, deep)}, more than {MAX_DEPTH} levels down "
            "(pass those folders themselves)"
        )
    if over:
        lines.append(
            f"{root}: not read: {_some(root, over)}, past the first {MAX_FOLDERS} folders "
            "(pass those folders themselves)"
        )
    return tuple(lines)


def _some(root: Path, folders: list[Path]) -> str:
    shown = ", ".join(str(p.relative_to(root)) for p in folders[:3])
    more = f" and {len(folders) - 3} more" if len(folders) > 3 else ""
    return f"{len(folders)} folder(s) with results ({shown}{more})"
