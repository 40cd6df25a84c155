"""Prometheus text through prometheus_client's parser, with the guards that parser lacks.

That parser is lax, knows no line numbers, raises whatever Python raises (ValueError,
IndexError, OverflowError, ...) and spends quadratic time on some line shapes. Here it is fed
one line at a time, so every failure becomes a :class:`MetricsError` that names the line, and
it never sees more than it can handle:

- an exposition over 64 MiB, or a line over 1 MiB, is refused;
- a sample line over 8 KiB with more than 512 quotes and label-separating commas is refused
  (the parser pays line length × their number), as is a quoted ``# TYPE`` line over 4 KiB;
  below these caps no line costs more per byte than an ordinary exposition;
- comment lines other than ``# TYPE`` reach the parser as blank lines: their text (HELP) is
  never used here, and long ones are its slowest input;
- a leading UTF-8 byte order mark is dropped; CR LF line ends are fine (lines are stripped).

A sample value beyond the float range (``1e999``, 309 or more digits) is refused, naming its
line: Prometheus refuses such a scrape too (Go's ``strconv.ParseFloat`` fails with
``ErrRange``), while prometheus_client reads some as +Inf and fails on others. ``NaN``,
``+Inf`` and ``-Inf`` written out are ordinary values.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from typing import TextIO, cast

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_fd_to_metric_families

from ttftscope.errors import MetricsError

MAX_TEXT_CHARS = 64 * 2**20
MAX_LINE_CHARS = 2**20
_WIDE_LINE = 8 * 2**10
_MAX_QUOTES_AND_COMMAS = 512
_MAX_QUOTED_TYPE_LINE = 4096
_EXCERPT = 120

PARSE_HINT = "point api.metrics_url at the server's Prometheus /metrics endpoint"
BROKEN_HINT = (
    "the server's exposition is broken: report it to the server's maintainers, or point "
    "api.metrics_url at another server"
)

_ASCII_SPACE = re.compile(r"[ \t\n\r\x0b\x0c]+")  # what the parser splits comment lines on
# A float overflows only with 309+ integer digits, or 210+ with a 2-digit exponent, or a
# 3-digit exponent: lines without such a run cannot hold an out-of-range literal.
_BIG_NUMBER = re.compile(r"\d{210}|[eE][+-]?\d{3}")
_INF_TOKEN = re.compile(r"(?<!\S)[+-]?inf(?:inity)?(?!\S)", re.IGNORECASE)
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def excerpt(line: str) -> str:
    """The line as shown in messages: quoted, at most ~120 characters.

    >>> excerpt("x" * 200)[-5:]
    "...'"
    """
    return repr(line if len(line) <= _EXCERPT else line[: _EXCERPT - 3] + "...")


def line_error(source: str, no: int, line: str, what: str, hint: str) -> MetricsError:
    """``cannot read the metrics from <source>: line <no>: '<excerpt>' (<what>)``."""
    return MetricsError(
        f"cannot read the metrics from {source}: line {no}: {excerpt(line)} ({what})", hint=hint
    )


def _guarded(line: str, no: int, source: str) -> str:
    """The line as the parser gets it, or MetricsError when it is too costly to parse."""
    if len(line) > MAX_LINE_CHARS:
        what = f"a line of {len(line) / 2**20:.1f} MiB, over the 1 MiB limit"
        raise line_error(source, no, line, what, BROKEN_HINT)
    stripped = line.strip()
    if not stripped.startswith("#"):
        if len(line) > _WIDE_LINE and _label_marks(line) > _MAX_QUOTES_AND_COMMAS:
            what = "a sample line over 8 KiB with more than 512 quotes and label commas"
            raise line_error(source, no, line, what, BROKEN_HINT)
        return line
    if _ASCII_SPACE.split(stripped, maxsplit=2)[:2] != ["#", "TYPE"]:
        return ""
    if '"' not in line:  # runs of spaces cost the parser quadratic time; unquoted, they mean one
        return " ".join(_ASCII_SPACE.split(stripped))
    if len(line) > _MAX_QUOTED_TYPE_LINE:
        raise line_error(source, no, line, "a # TYPE line over 4 KiB", BROKEN_HINT)
    return line


def _label_marks(line: str) -> int:
    """Quotes plus commas outside quotes: what the parser's label loop pays for."""
    quotes = line.count('"')
    if quotes + line.count(",") <= _MAX_QUOTES_AND_COMMAS:
        return quotes + line.count(",")  # cheap and usual: commas in values cannot matter
    return quotes + _QUOTED.sub("", line).count(",")


class _Feed:
    """The guarded lines, one at a time; ``no`` is the number of the line last handed out.

    ``declared`` keeps every ``# TYPE`` of each (unquoted) name in order: the parser lets a
    later ``# TYPE`` of the same family silently replace the first.
    """

    def __init__(self, lines: Sequence[str], source: str) -> None:
        self.lines, self.source, self.no = lines, source, 0
        self.declared: dict[str, list[str]] = {}

    def __iter__(self) -> Iterator[str]:
        for no, line in enumerate(self.lines, 1):
            self.no = no
            fed = _guarded(line, no, self.source)
            words = fed.split(" ") if fed.startswith("# TYPE ") and '"' not in fed else []
            if len(words) == 4:
                self.declared.setdefault(words[2], []).append(words[3])
            yield fed


def _run_parser(feed: _Feed) -> list[Metric]:
    # The parser only iterates over its "file": a line iterator is all it needs.
    return list(text_fd_to_metric_families(cast("TextIO", feed)))


def read_families(text: str, source: str) -> tuple[list[Metric], dict[str, list[str]]]:
    """The metric families in ``text`` and the types each ``# TYPE`` line declared, by name;
    MetricsError naming the line when the text is not valid.

    >>> families, declared = read_families("\\ufeff# TYPE a gauge\\r\\na 1\\r\\n", "<t>")
    >>> [(f.name, f.type) for f in families], declared
    ([('a', 'gauge')], {'a': ['gauge']})
    """
    if len(text) > MAX_TEXT_CHARS:
        raise MetricsError(
            f"the metrics from {source} are {len(text) / 2**20:.0f} MiB, over the 64 MiB limit",
            hint="no inference server writes that much: check api.metrics_url (is it a "
            "federation or aggregator endpoint?)",
        )
    lines = text.removeprefix("\ufeff").split("\n")
    feed = _Feed(lines, source)
    try:
        families = _run_parser(feed)
    except MetricsError:
        raise
    except Exception as exc:  # third-party and lax: anything it raises means "not parsable"
        raise _parse_error(lines, feed.no, exc, source) from None
    _check_range(lines, families, source)
    return families, feed.declared


def _reason(exc: Exception) -> str:
    text = str(exc) or "not valid Prometheus text"  # the parser raises some ValueErrors bare
    return text if len(text) <= 100 else text[:97] + "..."


def _fails_alone(line: str, source: str) -> str | None:
    try:
        _run_parser(_Feed([line], source))
    except Exception as exc:
        return _reason(exc)
    return None


def _parse_error(lines: list[str], no: int, exc: Exception, source: str) -> MetricsError:
    """Name the line at fault: the one the parser stopped at, else the nearest one before it
    that fails on its own (a bad ``# TYPE`` line only fails once its family ends)."""
    for n in itertools.chain((no,), range(no - 1, 0, -1)):
        reason = _fails_alone(lines[n - 1], source) if 1 <= n <= len(lines) else None
        if reason is not None:
            return line_error(source, n, lines[n - 1], reason, PARSE_HINT)
    # No known text gets here (parse errors are line-local); if one does, it still gets a line.
    shown = excerpt(lines[no - 1]) if 1 <= no <= len(lines) else "''"
    return MetricsError(
        f"cannot read the metrics from {source}: near line {no}: {shown} ({_reason(exc)})",
        hint=PARSE_HINT,
    )


def beyond_float(value: float) -> bool:
    """True for ±Inf and for integers too large for a float.

    >>> beyond_float(10**400), beyond_float(float("inf")), beyond_float(1.5)
    (True, True, False)
    """
    try:
        return math.isinf(float(value))
    except OverflowError:
        return True


def _check_range(lines: list[str], families: list[Metric], source: str) -> None:
    """Refuse sample values beyond the float range, naming the line."""
    if not any(beyond_float(s.value) for fam in families for s in fam.samples):
        return  # the usual case: no infinite value at all, nothing to look for
    for no, line in enumerate(lines, 1):
        if line.lstrip().startswith("#") or not _BIG_NUMBER.search(line):
            continue
        try:
            alone = _run_parser(_Feed([line], source))
        except Exception:  # parsed in context: nothing to say about it on its own
            continue
        if any(beyond_float(s.value) for f in alone for s in f.samples) and not (
            _INF_TOKEN.search(line)
        ):
            what = "a sample value beyond the float range; Prometheus refuses such scrapes too"
            raise line_error(source, no, line, what, BROKEN_HINT)
