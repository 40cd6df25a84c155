"""The plots read at a glance: a few curves by default, one colour per series on the whole
page, whole-run bars per server, runs named once, and each run's timeline on its own axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    probe_records,
    queue_samples,
    write_mixed_dirs,
    write_probe_dir,
)
from ttftscope.report.cdf import ttft_cdf
from ttftscope.report.figures import parts_bars, report_plots
from ttftscope.report.style import page_of
from ttftscope.report.timeplots import queue_figure
from ttftscope.results.runs import Run, load_runs

_SERVER_VIEW = ("server_ttft_ms", "queue_ms", "prefill_ms", "server_frontend_ms")


def _sweep(tmp: Path) -> list[Run]:
    recs = probe_records(
        sizes=(0, 2000, 8000), variants=("chat", "text", "ids", "direct", "gateway")
    )
    write_probe_dir(tmp, recs)
    return load_runs([tmp])


def _shown(fig: Any) -> list[str]:
    return [t.name for t in fig.data if t.visible is not False]


def test_the_cdf_shows_one_curve_per_series_at_the_largest_context_and_a_menu(
    tmp_path: Path,
) -> None:
    fig = ttft_cdf(page_of(_sweep(tmp_path)))
    assert len(fig.data) == 15  # 5 series x 3 sizes, every one a click away
    assert _shown(fig) == [
        f"{v}, 8,000 tokens" for v in ("chat", "direct", "gateway", "text", "ids")
    ]
    (menu,) = fig.layout.updatemenus
    labels = [b.label for b in menu.buttons]
    assert labels == ["8,000 tokens (largest)", "0 tokens", "2,000 tokens", "every context size"]
    zero = menu.buttons[1].args[0]["visible"]
    assert [t.name for t, v in zip(fig.data, zero, strict=True) if v] == [
        f"{v}, 0 tokens" for v in ("chat", "direct", "gateway", "text", "ids")
    ]
    assert sum(zero) == 5 and all(menu.buttons[3].args[0]["visible"])


def test_one_context_size_needs_no_menu(tmp_path: Path) -> None:
    write_probe_dir(tmp_path, probe_records(sizes=(8000,)))
    fig = ttft_cdf(page_of(load_runs([tmp_path])))
    assert not fig.layout.updatemenus and len(_shown(fig)) == 3


def _colours(fig: Any) -> dict[str, str]:
    """Series name → colour of every trace that has one (markers or line)."""
    out = {}
    for t in fig.data:
        colour = getattr(t.marker, "color", None) or getattr(t.line, "color", None)
        if isinstance(colour, str):
            out[str(t.name).split(",")[0]] = colour
    return out


def test_a_series_has_one_colour_in_every_plot(tmp_path: Path) -> None:
    runs = load_runs(write_mixed_dirs(tmp_path))
    plots = {p.key: p.figure for p in report_plots(runs)}
    seen: dict[str, set[str]] = {}
    for key in ("ttft-cdf", "queue", "hit-rate", "tokenization"):
        for name, colour in _colours(plots[key]).items():
            seen.setdefault(name, set()).add(colour)
    assert {"chat", "text", "ids", "direct", "gateway"} <= set(seen)
    assert {name: len(c) for name, c in seen.items() if len(c) > 1} == {}
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and no two share one


def test_labels_name_each_run_once_not_on_every_series(tmp_path: Path) -> None:
    runs = load_runs(write_mixed_dirs(tmp_path))
    labels = [run.label for run in runs]
    for plot in report_plots(runs):
        for trace in plot.figure.data:
            texts = [str(trace.name)]
            for axis in (trace.x, trace.y):
                if axis is not None and len(axis) and isinstance(axis[0], list | tuple):
                    texts += [str(v) for level in axis for v in level]
            assert not [t for t in texts for label in labels if label in t], plot.key


def _bench_on(tmp: Path, servers: dict[str, object]) -> Run:
    recs = bench_records(8, Parts(frontend=60.0), targets=("direct", "gateway"))
    recs = [r.model_copy(update=dict.fromkeys(_SERVER_VIEW)) for r in recs]
    summary: dict[str, object] = {
        "run_id": "b",
        "targets": {t: {"completed": 8, "mean_ttft_ms": 120.0} for t in ("direct", "gateway")},
        "servers": servers,
    }
    BenchDir(records=recs, summary=summary).write(tmp)
    (run,) = load_runs([tmp])
    return run


def _server(targets: list[str], front: float) -> dict[str, object]:
    return {
        "targets": targets,
        "engine": "vllm-v1",
        "server_requests": 8,
        "server_mean_ttft_ms": front + 50.0,
        "server_mean_frontend_ms": front,
        "server_mean_queue_ms": 10.0,
        "server_mean_prefill_ms": 40.0,
    }


def _bar_names(run: Run) -> list[str]:
    (first, *_) = parts_bars(page_of([run])).data
    return [str(name) for name in first.x[1]]


def test_whole_run_bars_only_for_targets_with_their_own_server(tmp_path: Path) -> None:
    shared = _bench_on(tmp_path / "a", {"m": _server(["direct", "gateway"], 60.0)})
    assert _bar_names(shared) == ["direct + gateway (one server)"]
    own = _bench_on(
        tmp_path / "b", {"m1": _server(["direct"], 60.0), "m2": _server(["gateway"], 5.0)}
    )
    assert _bar_names(own) == ["direct", "gateway"]
    front = next(t for t in parts_bars(page_of([own])).data if t.name == "server front end")
    assert list(front.y) == [60.0, 5.0]


def _queued_run(tmp: Path, run_id: str, peak: int) -> Run:
    BenchDir(
        records=bench_records(4, Parts(), run_id=run_id),
        samples=queue_samples(9, waiting_peak=peak),
        summary={"run_id": run_id},
    ).write(tmp)
    (run,) = load_runs([tmp])
    return run


def test_each_runs_timeline_has_its_own_axis(tmp_path: Path) -> None:
    runs = [_queued_run(tmp_path / "a", "a", 40), _queued_run(tmp_path / "b", "b", 1)]
    fig = queue_figure(runs)
    assert [t.yaxis for t in fig.data] == ["y", "y2"]
    assert fig.layout.yaxis2 is not None and fig.layout.xaxis2 is not None
    assert [a.text for a in fig.layout.annotations] == [run.label for run in runs]


def test_no_legend_sits_below_a_plot_where_the_x_axis_title_is(tmp_path: Path) -> None:
    for runs in (load_runs(write_mixed_dirs(tmp_path / "m")), _sweep(tmp_path / "s")):
        for plot in report_plots(runs):
            legend = plot.figure.layout.legend
            assert legend.y >= 1 or legend.x >= 1, plot.key
