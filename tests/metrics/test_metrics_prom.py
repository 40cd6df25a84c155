"""Parsing, snapshots, deltas and histogram quantiles."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.metrics.metrics_expo import Expo
from ttftscope.errors import MetricsError
from ttftscope.metrics.histogram import histogram_quantile, histogram_quantiles
from ttftscope.metrics.prom import labels_of, metrics_delta, parse_metrics

TTFT = "vllm:time_to_first_token_seconds"
TINY = {"model_name": "tiny"}


def test_real_vllm_exposition_names_and_types(vllm_text: str) -> None:
    snap = parse_metrics(vllm_text)
    assert snap.families["vllm:prefix_cache_queries"] == "counter"
    assert snap.families["vllm:prompt_tokens_cached"] == "counter"
    assert snap.families[TTFT] == "histogram"
    assert snap.families["vllm:request_prefill_kv_computed_tokens"] == "histogram"
    assert snap.families["vllm:num_requests_waiting"] == "gauge"
    # A histogram whose name ends in _total: must not be mistaken for a counter.
    assert snap.families["vllm:iteration_tokens_total"] == "histogram"
    assert snap.value("vllm:prefix_cache_queries_total") == 684458.0
    assert snap.value("vllm:prefix_cache_hits_total", TINY) == 568064.0
    assert snap.value("vllm:request_success_total") == 20.0  # summed over finished_reason
    assert snap.value("vllm:request_success_total", {"finished_reason": "length"}) == 20.0
    assert snap.value("vllm:prefix_cache_queries_total", {"model_name": "other"}) is None
    assert snap.label_values("engine", "vllm:") == ["0"]


def test_snapshot_histogram_reads_cumulative_buckets(vllm_text: str) -> None:
    hist = parse_metrics(vllm_text).histogram(TTFT)
    assert hist is not None
    assert hist.count == 20.0 and hist.sum == pytest.approx(70.78875970840454)
    assert hist.buckets[-1] == (math.inf, 20.0)
    assert [c for _, c in hist.buckets] == sorted(c for _, c in hist.buckets)
    assert parse_metrics(vllm_text).histogram("vllm:no_such_histogram") is None


def test_delta_of_one_observation(vllm_text: str, expo: Expo) -> None:
    after = expo.observe(vllm_text, TTFT, 0.3)
    after = expo.add(after, "vllm:prefix_cache_queries_total", 1000)
    after = expo.set(after, "vllm:num_requests_running", 1)
    d = metrics_delta(
        parse_metrics(vllm_text, taken_ns=0), parse_metrics(after, taken_ns=2_500_000_000)
    )
    hist = d.histogram(TTFT)
    assert hist is not None
    assert hist.count == 1.0
    assert hist.sum == pytest.approx(0.3)
    assert 0.25 <= (hist.quantile(0.5) or -1) <= 0.5  # the 0.25..0.5 bucket holds it
    assert d.value("vllm:prefix_cache_queries_total") == 1000.0
    assert d.value("vllm:prefix_cache_hits_total") == 0.0
    assert d.value("vllm:num_requests_running") == 1.0  # gauges: the after value
    assert d.value("vllm:kv_cache_usage_perc") == 0.0
    assert d.elapsed_s == 2.5
    assert d.resets == () and d.notes == ()
    other = d.histogram("vllm:request_queue_time_seconds")
    assert other is not None and (other.count, other.sum) == (0.0, 0.0)


def test_delta_rejects_swapped_snapshots(vllm_text: str) -> None:
    with pytest.raises(ValueError, match="swap"):
        metrics_delta(parse_metrics(vllm_text, taken_ns=10), parse_metrics(vllm_text, taken_ns=5))


def test_counter_reset_is_detected_and_noted(vllm_text: str, expo: Expo) -> None:
    after = expo.set(vllm_text, "vllm:prefix_cache_queries_total", 500)
    d = metrics_delta(parse_metrics(vllm_text, taken_ns=0), parse_metrics(after, taken_ns=1))
    assert d.value("vllm:prefix_cache_queries_total") == 500.0  # since the restart
    assert any("vllm:prefix_cache_queries" in r for r in d.resets)
    assert any("restarted" in n for n in d.notes)
    assert d.value("vllm:prefix_cache_hits_total") == 0.0  # untouched series still differ


def test_histogram_reset_uses_after_values_for_every_bucket(vllm_text: str, expo: Expo) -> None:
    fresh = expo.set(vllm_text, f"{TTFT}_bucket", 0.0)
    fresh = expo.set(fresh, f"{TTFT}_sum", 0.0)
    fresh = expo.set(fresh, f"{TTFT}_count", 0.0)
    after = expo.observe(fresh, TTFT, 0.03)
    d = metrics_delta(parse_metrics(vllm_text, taken_ns=0), parse_metrics(after, taken_ns=1))
    hist = d.histogram(TTFT)
    assert hist is not None and (hist.count, hist.sum) == (1.0, 0.03)
    assert all(c >= 0 for _, c in hist.buckets)  # no negative bucket deltas


def test_created_timestamp_change_means_restart(vllm_text: str, expo: Expo) -> None:
    after = expo.add(vllm_text, "vllm:prompt_tokens_total", 10)
    after = expo.add(after, "vllm:prompt_tokens_created", 3600)
    d = metrics_delta(parse_metrics(vllm_text, taken_ns=0), parse_metrics(after, taken_ns=1))
    assert d.value("vllm:prompt_tokens_total") == 684468.0
    assert d.resets == ('vllm:prompt_tokens{engine="0",model_name="tiny"}',)


def test_new_label_set_counts_from_zero_and_vanished_is_noted() -> None:
    a = parse_metrics('# TYPE c_total counter\nc_total{m="a"} 4\n', taken_ns=0)
    b = parse_metrics('# TYPE c_total counter\nc_total{m="b"} 3\n', taken_ns=1)
    d = metrics_delta(a, b)
    assert d.series("c_total") == {labels_of(m="b"): 3.0}
    assert any("missing from the second" in n for n in d.notes)


def test_bare_counter_type_line_is_adopted() -> None:
    text = "# TYPE c counter\nc_total 5\n"
    d = metrics_delta(
        parse_metrics(text, taken_ns=0), parse_metrics(text.replace("5", "8"), taken_ns=1)
    )
    assert d.value("c_total") == 3.0


@pytest.mark.parametrize(
    "text, where",
    [
        ("ok 1\n<html><body>hi</body></html>\n", "line 2"),
        ('ok 1\nbroken{a="b" 2\n', "line 2"),
        ('{"detail":"Not Found"}', "line 1"),
        ("ok 1\n# TYPE x weird\n", "line 2"),
    ],
)
def test_unparsable_text_names_the_line(text: str, where: str) -> None:
    with pytest.raises(MetricsError, match=where) as err:
        parse_metrics(text, source="http://h/metrics")
    assert "api.metrics_url" in str(err.value)


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_parse_fails_only_with_metrics_error(text: str) -> None:
    with contextlib.suppress(MetricsError):
        parse_metrics(text)


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda k: k != "le"),
        st.text(max_size=20),
        max_size=4,
    ),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
@settings(max_examples=100, deadline=None)
def test_label_values_round_trip(labels: dict[str, str], value: float) -> None:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    body = ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())
    snap = parse_metrics(f"# TYPE g gauge\ng{{{body}}} {value!r}\n")
    assert snap.series("g") == {labels_of(labels): value}


# --- quantiles ----------------------------------------------------------------------------

INF = math.inf


@pytest.mark.parametrize(
    "buckets, q, expected",
    [
        ([(1.0, 2), (2.0, 4), (INF, 4)], 0.75, 1.5),
        ([(1.0, 2), (2.0, 4), (INF, 4)], 0.5, 1.0),
        ([(1.0, 2), (2.0, 4), (INF, 4)], 0.25, 0.5),
        ([(0.1, 10), (0.5, 30), (1.0, 40), (INF, 40)], 0.5, 0.3),
        ([(1.0, 1), (INF, 2)], 0.9, 1.0),  # rank in +Inf: highest finite bound
        ([(1.0, 0), (2.0, 3), (INF, 3)], 0.0, 1.0),  # q=0: start of the first non-empty bucket
        ([(2.0, 4), (1.0, 2), (INF, 4)], 0.75, 1.5),  # unsorted input
        ([(1.0, 2), (2.0, 1.9999999), (INF, 4)], 0.5, 1.0),  # float noise smoothed
        ([(-1.0, 1), (1.0, 2), (INF, 2)], 0.25, -1.0),  # non-positive first bound
    ],
)
def test_histogram_quantile_hand_computed(
    buckets: list[tuple[float, float]], q: float, expected: float
) -> None:
    assert histogram_quantile(buckets, q) == pytest.approx(expected)


@pytest.mark.parametrize("buckets", [[], [(INF, 3)], [(1.0, 1), (2.0, 2)], [(1.0, 0), (INF, 0)]])
def test_histogram_quantile_unknown(buckets: list[tuple[float, float]]) -> None:
    assert histogram_quantile(buckets, 0.5) is None


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan])
def test_histogram_quantile_rejects_bad_q(q: float) -> None:
    with pytest.raises(ValueError, match="quantile"):
        histogram_quantile([(1.0, 1), (INF, 1)], q)


@st.composite
def cumulative_buckets(draw: st.DrawFn) -> list[tuple[float, float]]:
    bounds = sorted(set(draw(st.lists(st.floats(0.001, 1e4), min_size=1, max_size=12))))
    incs = draw(st.lists(st.integers(0, 50), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    counts = [float(sum(incs[: i + 1])) for i in range(len(incs))]
    return list(zip([*bounds, INF], counts, strict=True))


@given(cumulative_buckets(), st.floats(0, 1), st.floats(0, 1))
@example(  # adjacent float bounds: once failed the old oracle, not the code
    buckets=[(0.001, 0.0), (0.0010000000000000002, 1.0), (1.0, 1.0), (INF, 1.0)], q1=0.0, q2=1.0
)
@settings(max_examples=300, deadline=None)
def test_quantile_monotone_and_within_bucket(
    buckets: list[tuple[float, float]], q1: float, q2: float
) -> None:
    lo_q, hi_q = sorted((q1, q2))
    a, b = histogram_quantile(buckets, lo_q), histogram_quantile(buckets, hi_q)
    if buckets[-1][1] == 0:
        assert a is None and b is None
        return
    assert a is not None and b is not None
    assert a <= b + 1e-9
    total, top = buckets[-1][1], buckets[-2][0]
    # (lower, below, upper, count) of each finite bucket; the first one starts at 0.
    spans = [
        (lo, below, hi, count)
        for (lo, below), (hi, count) in zip([(0.0, 0.0), *buckets[:-2]], buckets[:-1], strict=True)
    ]
    for q, v in ((lo_q, a), (hi_q, b)):
        eps = 1e-9 * max(1.0, v)  # interpolation rounds in the last bits of large values
        assert 0.0 <= v <= top + eps
        rank = q * total
        # v lies in a bucket whose cumulative range holds the rank, or is the top bound for a
        # rank in the +Inf bucket. (Bounds may be adjacent floats: compare per bucket, not
        # against every bound within eps of v.)
        in_bucket = any(
            lo - eps <= v <= hi + eps and below - 1e-9 <= rank <= count + 1e-9
            for lo, below, hi, count in spans
        )
        assert in_bucket or (v == top and rank >= buckets[-2][1] - 1e-9)


def test_histogram_quantiles_over_a_window(vllm_text: str, expo: Expo) -> None:
    after = vllm_text
    for v in (0.03, 0.03, 0.03, 4.0):
        after = expo.observe(after, TTFT, v)
    d = metrics_delta(parse_metrics(vllm_text, taken_ns=0), parse_metrics(after, taken_ns=1))
    qs = histogram_quantiles(d, TTFT, [0.5, 0.99])
    assert qs[0.5] is not None and 0.02 <= qs[0.5] <= 0.04
    assert qs[0.99] is not None and 2.5 <= qs[0.99] <= 5.0
    assert histogram_quantiles(d, "vllm:nope", [0.5]) == {0.5: None}
