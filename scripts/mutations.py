"""Seeded breaks: each must turn at least one of its tests red, or this check fails.

Each break is one textual change to one source file. It is applied to a temporary copy of
``src/`` (the working tree is never touched), the tests named for it run against that copy
(``PYTHONPATH`` first, checked by asking the copy which ``ttftscope`` it imports), and the
break is caught when they fail. The unchanged copy must pass the same tests first: a test that
fails anyway catches nothing. A break whose text is no longer found in its file is an error,
not a pass: the list follows the code.

A hand-written list rather than mutmut: mutmut 3 generated 622 mutants for decompose, stats,
profiles and sessions here (384 of them in sessions, whose tests take ~5 s a run), which puts
one pass at half an hour or more (estimated: mutmut did not finish a run here); here each
break is one the issue found surviving or one a reviewer would seed, with the few test files
that must catch it, so the whole check fits in CI (45 s here, 2 min on a busy machine).

    .venv/bin/python scripts/mutations.py            # every break, then the table
    .venv/bin/python scripts/mutations.py --list     # the breaks and their tests
    .venv/bin/python scripts/mutations.py read-horizon decompose-prefill-alone
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Break:
    """``old`` → ``new`` in ``path`` (under ``src/ttftscope/``), to be caught by ``tests``."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


BREAKS: tuple[Break, ...] = (
    # the three the review of issue 34 found surviving
    Break(
        "models-without-key",
        "gateway/app.py",
        'Route(_GET, "/v1/models", "openai", "key", None, models)',
        'Route(_GET, "/v1/models", "openai", "public", None, models)',
        ("tests/gateway/test_doors.py",),
    ),
    Break(
        "decompose-prefill-alone",
        "decompose.py",
        "rec.queue_ms + rec.prefill_ms <= rec.server_ttft_ms + _TOLERANCE_MS",
        "rec.prefill_ms <= rec.server_ttft_ms + _TOLERANCE_MS",
        ("tests/test_decompose.py",),
    ),
    Break(
        "read-horizon",
        "tokenization/cuts.py",
        "target = _target(cached, c, q - READ_MARGIN, 0) if q >= 0 else -1",
        "target = _target(cached, c, q, 0) if q >= 0 else -1",
        ("tests/tokenization/test_read_horizon.py",),
    ),
    # the fast window's joins keep the same read horizon (issue 34: its own copy of q - 2)
    Break(
        "fastpath-horizon-hf-join",
        "tokenization/fastpath.py",
        "k = bisect_right(offsets, (q - READ_MARGIN - pos, 1 << 62)) - 1",
        "k = bisect_right(offsets, (q - pos, 1 << 62)) - 1",
        ("tests/tokenization/test_read_horizon.py",),
    ),
    Break(
        "fastpath-horizon-ascii-join",
        "tokenization/fastpath.py",
        "j = bisect_right(starts, q - READ_MARGIN) - 1 if q >= 0 else 0",
        "j = bisect_right(starts, q) - 1 if q >= 0 else 0",
        ("tests/tokenization/test_read_horizon.py",),
    ),
    # the gateway's one request handler: every route keyed, /metrics as metrics_public says
    Break(
        "handler-skips-the-key",
        "gateway/routing.py",
        "        _admit(gw, route, scope)\n",
        "",
        ("tests/gateway/test_doors.py",),
    ),
    Break(
        "metrics-always-public",
        "gateway/routing.py",
        "        if gw.settings.metrics_public:\n",
        "        if True:\n",
        ("tests/gateway/test_doors.py",),
    ),
    Break(
        "stored-responses-public",
        "gateway/app.py",
        '"openai", "key",\n              "responses_stored"',
        '"openai", "public",\n              "responses_stored"',
        ("tests/gateway/test_doors.py",),
    ),
    # the core: decompose
    Break(
        "decompose-outside-sign",
        "decompose.py",
        "rec.outside_server_ms = rec.wire_ttft_ms - rec.server_ttft_ms",
        "rec.outside_server_ms = rec.server_ttft_ms - rec.wire_ttft_ms",
        ("tests/test_decompose.py",),
    ),
    Break(
        "decompose-server-after-client",
        "decompose.py",
        "rec.server_ttft_ms <= rec.wire_ttft_ms + _TOLERANCE_MS",
        "rec.server_ttft_ms >= rec.wire_ttft_ms - _TOLERANCE_MS",
        ("tests/test_decompose.py",),
    ),
    Break(
        "decompose-contamination-threshold",
        "decompose.py",
        "if any(v > 1 for v in seen.values()):",
        "if any(v > 2 for v in seen.values()):",
        ("tests/test_decompose.py",),
    ),
    # stats
    Break(
        "stats-no-interpolation",
        "stats.py",
        "hi = min(lo + 1, len(data) - 1)",
        "hi = lo",
        ("tests/test_stats.py",),
    ),
    Break(
        "stats-nan-kept",
        "stats.py",
        "if v is not None and not math.isnan(v)",
        "if v is not None",
        ("tests/test_stats.py",),
    ),
    # the gateway's session cache
    Break(
        "sessions-evicts-busy",
        "gateway/pipeline/sessions.py",
        "for i, e in self._entries.items() if not e.busy)",
        "for i, e in self._entries.items())",
        ("tests/gateway/pipeline/test_sessions_eviction.py",),
    ),
    Break(
        "sessions-not-lru",
        "gateway/pipeline/sessions.py",
        "        self._entries.move_to_end(entry_id)\n",
        "",
        ("tests/gateway/pipeline/test_sessions_eviction.py",),
    ),
    # vLLM version profiles
    Break(
        "profiles-since-exclusive",
        "gateway/pipeline/profiles.py",
        "return self.release >= r.since and rule not in self.off",
        "return self.release > r.since and rule not in self.off",
        ("tests/gateway/pipeline/test_profiles.py",),
    ),
    Break(
        "profiles-off-ignored",
        "gateway/pipeline/profiles.py",
        "return self.release >= r.since and rule not in self.off",
        "return self.release >= r.since",
        ("tests/gateway/pipeline/test_profiles.py",),
    ),
)


@dataclass(frozen=True)
class Outcome:
    """One break's run: caught when its tests failed."""

    brk: Break
    caught: bool
    seconds: float


class CheckError(Exception):
    """The check itself cannot run as asked (a break that no longer applies, a red baseline)."""


def copy_source(into: Path) -> Path:
    """A copy of ``src/`` under ``into``; its path."""
    src = into / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


def apply(brk: Break, src: Path) -> None:
    """Write ``brk`` into the copy at ``src``; its text must occur exactly once."""
    target = src / "ttftscope" / brk.path
    text = target.read_text()
    found = text.count(brk.old)
    if found != 1:
        raise CheckError(
            f"break {brk.name}: its text occurs {found} times in src/ttftscope/{brk.path} "
            "(exactly once needed): update it in scripts/mutations.py to follow the code"
        )
    target.write_text(text.replace(brk.old, brk.new))


def _env(src: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(ROOT)]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imports_copy(src: Path) -> None:
    """The tests must import ``ttftscope`` from the copy, not an installed one."""
    code = "import ttftscope; print(ttftscope.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(src), capture_output=True, text=True, check=True
    )
    if not out.stdout.strip().startswith(str(src)):
        raise CheckError(f"ttftscope imports from {out.stdout.strip()}, not the copy at {src}")


def run_tests(tests: Sequence[str], src: Path) -> int:
    """pytest over ``tests`` against the copy at ``src``; its exit code."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", "-m", ""]
    cmd += ["--no-header", "-o", "addopts=", *tests]
    done = subprocess.run(cmd, cwd=ROOT, env=_env(src), capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 2-5: interrupted, internal error, usage, none ran
        raise CheckError(f"pytest {' '.join(tests)} could not run:\n{done.stdout[-2000:]}")
    return done.returncode


def baseline(breaks: Sequence[Break], scratch: Path) -> None:
    """Every break's tests pass on the unchanged source (else they catch nothing)."""
    src = copy_source(scratch / "baseline")
    check_imports_copy(src)
    tests = sorted({t for b in breaks for t in b.tests})
    if run_tests(tests, src) != 0:
        raise CheckError(f"the tests fail without any break: fix them first ({' '.join(tests)})")


def seed(brk: Break, scratch: Path) -> Outcome:
    """Apply ``brk`` to a fresh copy and run its tests."""
    t0 = time.monotonic()
    src = copy_source(scratch / brk.name)
    apply(brk, src)
    caught = run_tests(brk.tests, src) != 0
    return Outcome(brk, caught, time.monotonic() - t0)


def table(outcomes: Sequence[Outcome]) -> str:
    """The table printed at the end: break, tests run, caught."""
    rows = [("break", "tests run", "caught", "s")]
    for o in outcomes:
        caught = "yes" if o.caught else "NO (survived)"
        rows.append((o.brk.name, " ".join(o.brk.tests), caught, f"{o.seconds:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def chosen(names: Sequence[str]) -> list[Break]:
    """The breaks named (all when none is)."""
    by_name = {b.name: b for b in BREAKS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise CheckError(f"no break named {', '.join(unknown)}; --list shows them")
    return [by_name[n] for n in names] if names else list(BREAKS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="breaks to seed (default: all)")
    parser.add_argument("--list", action="store_true", help="list the breaks and exit")
    args = parser.parse_args(argv)
    try:
        breaks = chosen(args.names)
        if args.list:
            print(
                "\n".join(
                    f"{b.name}: src/ttftscope/{b.path} -> {' '.join(b.tests)}" for b in breaks
                )
            )
            return 0
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="ttftscope-mutations-") as tmp:
            baseline(breaks, Path(tmp))
            outcomes = [seed(b, Path(tmp)) for b in breaks]
    except CheckError as exc:
        print(f"mutations: {exc}", file=sys.stderr)
        return 2
    print(table(outcomes))
    survived = [o.brk.name for o in outcomes if not o.caught]
    caught = len(outcomes) - len(survived)
    print(f"{caught} of {len(outcomes)} breaks caught in {time.monotonic() - t0:.0f} s")
    if survived:
        print(f"survived: {', '.join(survived)}: add a test that fails on each", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
