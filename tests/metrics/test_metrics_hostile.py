"""Hostile or broken expositions: each ends in a MetricsError naming the line, or in a result
that says what it could not know (None, a note); never in another exception."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import fields
from typing import TextIO, cast

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_fd_to_metric_families

from tests.metrics.metrics_expo import Expo
from ttftscope.errors import MetricsError
from ttftscope.metrics import exposition
from ttftscope.metrics.engines import ServerBreakdown, latency_quantiles, server_breakdown
from ttftscope.metrics.exposition import MAX_LINE_CHARS, MAX_TEXT_CHARS
from ttftscope.metrics.histogram import bucket_bound, histogram_quantile, histogram_quantiles
from ttftscope.metrics.prom import MetricsDelta, metrics_delta, parse_metrics

INF, NAN = math.inf, math.nan
V = "vllm:"
TTFT = "vllm:time_to_first_token_seconds"


def _window(before: str, after: str) -> MetricsDelta:
    return metrics_delta(parse_metrics(before, taken_ns=0), parse_metrics(after, taken_ns=1))


def _numbers_are_finite_or_none(b: ServerBreakdown) -> bool:
    values = [getattr(b, f.name) for f in fields(b)] + [b.frontend_s]
    return all(math.isfinite(v) for v in values if isinstance(v, float))


# --- 1. values beyond the float range -----------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["1" + "9" * 400, "9" * 5000, "1e999", "-1e999", "9" * 250 + "e99", "-" + "9" * 309],
)
def test_out_of_range_value_is_refused_naming_the_line(value: str) -> None:
    text = f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {value}\n"
    with pytest.raises(MetricsError, match="line 2") as err:
        parse_metrics(text, source="http://h/metrics")
    message = str(err.value)
    assert "float range" in message and "http://h/metrics" in message
    assert "'vllm:num_requests_running " in message and "hint:" in message
    assert len(message) < 600  # the excerpt is cut short, not 5000 digits


def test_out_of_range_timestamp_is_refused() -> None:
    with pytest.raises(MetricsError, match="line 1"):
        parse_metrics("m 1 " + "9" * 400 + "\n")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("m +Inf\n", INF),
        ("m -Inf\n", -INF),
        ("m inf\n", INF),
        ('m{a="1e999"} 1\n', 1.0),  # a huge number in a label is just text
        ('m{a="' + "9" * 400 + '"} +Inf\n', INF),
        ("m 1e308\n", 1e308),
        ("m 1e-999\n", 0.0),  # underflow is a value: Go reads it as 0 too
    ],
)
def test_values_in_range_and_spelled_infinities_are_kept(text: str, expected: float) -> None:
    assert parse_metrics(text).value("m") == expected


def test_nan_values_are_kept() -> None:
    value = parse_metrics("m NaN\n").value("m")
    assert value is not None and math.isnan(value)


def test_sums_of_huge_or_infinite_series_do_not_raise() -> None:
    assert parse_metrics('a{x="1"} 1e308\na{x="2"} 1e308\n').value("a") == INF
    value = parse_metrics('a{x="1"} +Inf\na{x="2"} -Inf\n').value("a")
    assert value is not None and math.isnan(value)


# --- 2. le labels that are not numbers ----------------------------------------------------


@pytest.mark.parametrize(
    "le, bound",
    [
        ("+Inf", INF),
        ("Inf", INF),
        ("-Inf", -INF),
        ("0.5", 0.5),
        ("1e3", 1000.0),
        ("abc", None),
        ("NaN", None),
        ("", None),
        (" 1", None),
        ("1_0", None),
        ("\u0661", None),  # an Arabic-Indic one: Python's float() takes it, Prometheus not
        ("1e999", None),
    ],
)
def test_bucket_bound(le: str, bound: float | None) -> None:
    assert bucket_bound(le) == bound


_BAD_LE = """# TYPE t histogram
t_bucket{le="0.5"} %d
t_bucket{le="abc"} 1
t_bucket{le="+Inf"} %d
t_sum %g
t_count %d
"""


def test_non_numeric_le_is_skipped_with_a_note() -> None:
    before, after = (
        parse_metrics(_BAD_LE % (0, 0, 0, 0), taken_ns=0),
        parse_metrics(_BAD_LE % (1, 2, 1.0, 2)),
    )
    for view in (after, metrics_delta(before, after)):
        hist = view.histogram("t")
        assert hist is not None and hist.buckets == ((0.5, 1.0), (INF, 2.0))
        assert any("le='abc'" in n and "skipped" in n for n in hist.notes)
        assert hist.quantile(0.5) == 0.5
        assert histogram_quantiles(view, "t", [0.9]) == {0.9: 0.5}


def test_non_numeric_le_in_a_vllm_histogram(vllm_text: str, expo: Expo) -> None:
    def spoil(text: str) -> str:
        return text.replace(
            f'{TTFT}_bucket{{engine="0",le="0.001"', f'{TTFT}_bucket{{engine="0",le="x"'
        )

    assert spoil(vllm_text) != vllm_text
    d = _window(spoil(vllm_text), spoil(expo.observe(vllm_text, TTFT, 0.3)))
    assert server_breakdown(d).ttft_count == 1
    q = latency_quantiles(d, "ttft", [0.5])[0.5]
    assert q is not None and 0.25 <= q <= 0.5


# --- 3. quantiles of counts that are not counts -------------------------------------------


@pytest.mark.parametrize(
    "buckets, q",
    [
        ([(1.0, 1), (INF, INF)], 0.0),  # was StopIteration
        ([(1.0, 1), (INF, INF)], 0.5),
        ([(1.0, NAN), (INF, 2)], 0.5),
        ([(1.0, 1), (INF, NAN)], 0.5),
        ([(1.0, -INF), (INF, 2)], 0.5),
        ([(1.0, 1), (2.0, INF), (INF, INF)], 1.0),
        ([(NAN, 1), (INF, 2)], 0.5),  # a bound that is not a number
    ],
)
def test_quantile_of_non_finite_counts_is_none(
    buckets: list[tuple[float, float]], q: float
) -> None:
    assert histogram_quantile(buckets, q) is None


def test_quantiles_of_a_scraped_histogram_with_infinite_counts() -> None:
    text = (
        '# TYPE t histogram\nt_bucket{le="1"} 1\nt_bucket{le="+Inf"} +Inf\nt_sum 1\nt_count +Inf\n'
    )
    snap = parse_metrics(text)
    assert histogram_quantiles(snap, "t", [0.0, 0.5, 1.0]) == {0.0: None, 0.5: None, 1.0: None}
    hist = snap.histogram("t")
    assert hist is not None and hist.mean is None


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_quantile_of_dipping_counts_is_smoothed(q: float) -> None:
    v = histogram_quantile([(1.0, 5), (2.0, 1), (3.0, 4), (INF, 6)], q)
    assert v is not None and 0.0 <= v <= 3.0


def test_quantile_with_bounds_near_the_float_limit() -> None:
    v = histogram_quantile([(-1e308, 1), (1e308, 2), (INF, 2)], 0.75)
    assert v == 0.0  # halfway between -1e308 and 1e308, without overflowing on the way
    v = histogram_quantile([(1e308, 1), (1.7e308, 2), (INF, 2)], 0.75)
    assert v is not None and 1e308 <= v <= 1.7e308
    assert histogram_quantile([(-INF, 1), (INF, 1)], 0.5) is None


# --- 4. non-finite counts in a breakdown --------------------------------------------------


@pytest.mark.parametrize("count", ["NaN", "+Inf", "-Inf"])
def test_non_finite_counts_are_none_in_breakdown(vllm_text: str, expo: Expo, count: str) -> None:
    after = vllm_text.replace(
        f'{TTFT}_count{{engine="0",model_name="tiny"}} 20.0',
        f'{TTFT}_count{{engine="0",model_name="tiny"}} {count}',
    )
    assert after != vllm_text
    b = server_breakdown(_window(vllm_text, after))
    assert b.ttft_count is None  # the probe's "count >= 1" wait ends on None, not on NaN
    assert any(f"{TTFT}_count is" in n and "not a number" in n for n in b.notes)
    assert not any("no request finished" in n or "requests reached" in n for n in b.notes)
    assert _numbers_are_finite_or_none(b)


def test_infinite_minus_infinite_count_is_none(vllm_text: str) -> None:
    both = vllm_text.replace(
        f'{TTFT}_count{{engine="0",model_name="tiny"}} 20.0',
        f'{TTFT}_count{{engine="0",model_name="tiny"}} +Inf',
    )
    b = server_breakdown(_window(both, both))
    assert b.ttft_count is None and _numbers_are_finite_or_none(b)


def test_non_finite_sums_gauges_and_derived_values_are_none(vllm_text: str, expo: Expo) -> None:
    after = expo.set(vllm_text, f"{TTFT}_sum", NAN)
    after = expo.set(after, V + "num_requests_waiting", INF)
    after = expo.set(after, V + "request_prefill_kv_computed_tokens_sum", NAN)
    b = server_breakdown(_window(vllm_text, after))
    assert b.ttft_s is None and b.waiting is None and b.computed_tokens is None
    assert b.frontend_s is None
    assert any("computed_tokens came out as nan" in n for n in b.notes)
    assert _numbers_are_finite_or_none(b)


# --- 5. sizes, line ends, duplicates, types -----------------------------------------------


def test_exposition_over_the_size_cap() -> None:
    with pytest.raises(MetricsError, match="64 MiB"):
        parse_metrics("a 1\n" * (MAX_TEXT_CHARS // 4 + 1))


def test_line_over_the_length_cap_names_the_line() -> None:
    text = "ok 1\n" + 'm{a="' + "x" * MAX_LINE_CHARS + '"} 1\n'
    with pytest.raises(MetricsError, match=r"line 2: .*1 MiB limit"):
        parse_metrics(text)


def test_long_lines_within_the_caps_parse() -> None:
    value = "x," * 200_000  # commas inside a label value separate nothing
    snap = parse_metrics(f'm{{a="{value}"}} 1\n')
    assert snap.series("m") == {frozenset({("a", value)}): 1.0}


@pytest.mark.parametrize(
    "line",
    [
        "m{" + ",".join(f'a{i}="b"' for i in range(2000)) + "} 1",  # 2000 labels
        "m{" + "a=," * 5000 + "} 1",
        'm{a="' + '\\"' * 5000 + '"} 1',
    ],
)
def test_label_heavy_wide_lines_are_refused(line: str) -> None:
    with pytest.raises(MetricsError, match=r"line 2: .*quotes and label commas"):
        parse_metrics("ok 1\n" + line + "\n")


@pytest.mark.parametrize("comment", ["# TYPE", "# HELP", "#"])
def test_comment_lines_full_of_spaces_parse_fast(
    comment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prometheus_client's comment splitting is quadratic in runs of spaces (~20 s for 1 MiB):
    # such runs never reach it. Checked on what the parser is fed, not with a wall-time limit
    # that a loaded machine moves.
    fed: list[str] = []

    def spy(fd: Iterable[str]) -> Iterable[Metric]:
        lines = list(fd)
        fed.extend(lines)
        return text_fd_to_metric_families(cast("TextIO", iter(lines)))

    monkeypatch.setattr(exposition, "text_fd_to_metric_families", spy)
    text = comment + " " * (MAX_LINE_CHARS - 40) + "x gauge\nx 1\n"
    assert parse_metrics(text).value("x") == 1.0
    assert fed and not [line for line in fed if "  " in line]


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n  \n", "\ufeff", "# just a comment\n"])
def test_empty_and_blank_texts(text: str) -> None:
    snap = parse_metrics(text)
    assert snap.samples == {} and snap.notes == ()
    assert server_breakdown(metrics_delta(snap, snap)).engine == "unknown"


def test_crlf_line_ends_and_bom(vllm_text: str) -> None:
    plain = parse_metrics(vllm_text)
    assert parse_metrics(vllm_text.replace("\n", "\r\n")).samples == plain.samples
    assert parse_metrics("\ufeff" + vllm_text).samples == plain.samples


def test_bare_cr_is_no_line_end() -> None:
    with pytest.raises(MetricsError, match="line 1"):
        parse_metrics("a 1\rb 2\r")


def test_line_numbers_count_newlines_only() -> None:
    # str.splitlines() also splits at U+2028 and friends; the parser does not.
    with pytest.raises(MetricsError, match=re.escape("line 2: 'b{ 2'")):
        parse_metrics('a{x="\u2028"} 1\nb{ 2\n')


def test_bad_type_line_far_from_where_the_parser_stops(vllm_text: str) -> None:
    text = vllm_text.replace("# TYPE vllm:num_requests_waiting gauge", "# TYPE vllm:x weird")
    lines = text.split("\n")
    with pytest.raises(MetricsError, match=f"line {lines.index('# TYPE vllm:x weird') + 1}:"):
        parse_metrics(text)


def test_duplicate_series_keep_the_first_with_a_note(vllm_text: str) -> None:
    dup = 'vllm:num_requests_waiting{engine="0",model_name="tiny"} 9.0\n'
    snap = parse_metrics(vllm_text + dup)
    assert snap.value(V + "num_requests_waiting") == 0.0
    assert any("appear more than once" in n and "num_requests_waiting" in n for n in snap.notes)
    b = server_breakdown(
        metrics_delta(
            parse_metrics(vllm_text, taken_ns=0), parse_metrics(vllm_text + dup, taken_ns=1)
        )
    )
    assert b.waiting == 0.0 and any("appear more than once" in n for n in b.notes)


def test_repeated_label_sets_in_one_sample_are_refused() -> None:
    with pytest.raises(MetricsError, match="line 1"):
        parse_metrics('m{a="1",a="1"} 1\n')


@pytest.mark.parametrize(
    "text, family, kind, value",
    [
        ("# TYPE x histogram\nx 1\n", "x", "histogram", 1.0),
        ("# TYPE x counter\nx 1\n# TYPE x gauge\nx 2\n", "x", "gauge", 1.0),
        ("# TYPE x_total gauge\n# TYPE x_total counter\nx_total 2\n", "x", "counter", None),
        ("x 1\n# TYPE x gauge\nx 2\n", "x", "gauge", 1.0),
    ],
)
def test_type_lines_that_disagree_with_samples(
    text: str, family: str, kind: str, value: float | None
) -> None:
    snap = parse_metrics(text)
    assert snap.families[family] == kind
    assert snap.value("x") == value
    assert value is not None or snap.value("x_total") == 2.0
    assert any(f"{family} appears as" in n and f"read as {kind}" in n for n in snap.notes)
    d = metrics_delta(snap, parse_metrics(text.replace("1", "5"), taken_ns=snap.taken_ns + 1))
    assert any("appears as" in n for n in d.notes)


def test_histogram_type_over_gauge_samples(vllm_text: str) -> None:
    text = "# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds 3\n"
    b = server_breakdown(_window(text, text))
    assert b.ttft_s is None and _numbers_are_finite_or_none(b)
    assert latency_quantiles(parse_metrics(text), "ttft", [0.5]) == {0.5: None}


def test_nan_created_stamp_is_no_restart() -> None:
    text = "# TYPE c counter\nc_total %d\nc_created NaN\n"
    d = metrics_delta(parse_metrics(text % 1, taken_ns=0), parse_metrics(text % 3, taken_ns=1))
    assert d.value("c_total") == 2.0 and d.resets == ()
