"""The progress of long steps: in place on a terminal, plain periodic lines elsewhere."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from ttftscope.localserver import progress as pg

TORCH_LINE = "Downloading torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl (190.1 MB)"


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeTty(io.StringIO):
    """A terminal that records what was written to it."""

    def isatty(self) -> bool:
        return True


def pip_log(tmp_path: Path) -> Path:
    log = tmp_path / "install.log"
    log.write_text(
        "$ pip install torch\n"
        "Looking in indexes: https://pypi.org/simple\n"
        "Collecting torch==2.13.0+cpu\n"
        f"  {TORCH_LINE}\n"
        "WARNING: Location 'file:///x' is ignored\n",
        encoding="utf-8",
    )
    return log


def pip_detail(log: Path) -> pg.Detail:
    return lambda: pg.last_log_line(log, 0, pg.PIP_PREFIXES)


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the fake terminal's width


def test_last_log_line_reads_only_after_start_and_prefers_given_prefixes(tmp_path: Path) -> None:
    log = pip_log(tmp_path)
    assert pg.last_log_line(log, 0, pg.PIP_PREFIXES) == TORCH_LINE
    assert pg.last_log_line(log) == "WARNING: Location 'file:///x' is ignored"
    start = log.stat().st_size
    assert pg.last_log_line(log, start) is None  # an earlier step's lines are not this one's
    with log.open("a", encoding="utf-8") as fh:
        fh.write("Installing collected packages: " + ", ".join(["pkg"] * 80) + "\n\n")
    line = pg.last_log_line(log, start, pg.PIP_PREFIXES, max_chars=60)
    assert line is not None and line.startswith("Installing collected packages: pkg")
    assert len(line) == 60 and line.endswith("…")
    assert pg.last_log_line(tmp_path / "missing.log") is None


@pytest.mark.usefixtures("wide")
def test_ticker_redraws_one_line_in_place_on_a_terminal(tmp_path: Path) -> None:
    clock, tty, lines = FakeClock(), FakeTty(), list[str]()
    pace = pg.Pace(live_s=3600, clock=clock)  # the test ticks by hand
    ticker = pg.Ticker(
        "step 1/3", lines.append, detail=pip_detail(pip_log(tmp_path)), stream=tty, pace=pace
    )
    with ticker:
        assert ticker.live
        clock.now += 1
        ticker.tick()
        clock.now += 1
        ticker.tick()
    out = tty.getvalue()
    assert out.count("\r") == 4  # three redraws (one at the start) and the final erase
    assert "\n" not in out
    assert f"\r  2 s · step 1/3 · {TORCH_LINE}\x1b[K" in out
    assert out.endswith("\r\x1b[K")  # the status line is gone before the end line
    assert lines == ["step 1/3 …", "step 1/3: done in 2 s"]


def test_ticker_line_never_wraps_on_a_narrow_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    tty = FakeTty()
    ticker = pg.Ticker("x", lambda _: None, detail=pip_detail(pip_log(tmp_path)), stream=tty)
    ticker.tick()
    drawn = tty.getvalue().removeprefix("\r").removesuffix("\x1b[K")
    assert len(drawn) == 39 and drawn.endswith("…")


def test_ticker_says_a_plain_line_every_15_s_when_not_a_terminal(tmp_path: Path) -> None:
    clock, plain, lines = FakeClock(), io.StringIO(), list[str]()
    pace = pg.Pace(live_s=3600, clock=clock)
    label = "installing vLLM's dependencies"
    with pg.Ticker(
        label, lines.append, detail=pip_detail(pip_log(tmp_path)), stream=plain, pace=pace
    ) as ticker:
        assert not ticker.live
        for now in (1, 10, 15, 20, 29, 31, 44, 45):
            clock.now = 1000.0 + now
            ticker.tick()
    assert plain.getvalue() == ""  # nothing in place: whole lines only, through the callback
    still = f"… still {label}, %d s; last: {TORCH_LINE}"
    assert lines == [
        f"{label} …",
        still % 15,
        still % 31,
        still % 45,
        f"{label}: done in 45 s",
    ]
    assert all("\r" not in line for line in lines)


def test_ticker_ends_with_failed_after_when_the_step_fails() -> None:
    clock, lines = FakeClock(), list[str]()
    pace = pg.Pace(live_s=3600, clock=clock)
    with pytest.raises(RuntimeError), pg.Ticker("building", lines.append, pace=pace):
        clock.now += 7
        raise RuntimeError("boom")
    ticker = pg.Ticker("checking", lines.append, pace=pace)
    with ticker:
        ticker.ok = False
    assert lines == [
        "building …",
        "building: failed after 7 s",
        "checking …",
        "checking: failed after 0 s",
    ]


@pytest.mark.parametrize("width", [79, 60, 40, 20])
def test_status_line_keeps_the_elapsed_time_whole_at_any_width(width: int) -> None:
    label = "installing vLLM's dependencies (step 2/3, 59 requirements, torch pinned)"
    line = pg.status_line(label, 271.6, TORCH_LINE, width)
    assert len(line) <= width
    assert line.startswith("  272 s · ins")  # the number is never the part cut
    assert TORCH_LINE not in line  # the detail gives way first


def test_status_line_shows_everything_when_it_fits() -> None:
    assert pg.status_line("step 1/3", 5, "Collecting regex", 79) == (
        "  5 s · step 1/3 · Collecting regex"
    )


def test_in_place_line_only_for_the_default_reporter() -> None:
    assert pg.status_stream(pg.say_stderr) is sys.stderr
    assert pg.status_stream(lambda _: None) is None
    assert not pg.Ticker("x", lambda _: None).live  # a caller's own Progress gets whole lines


@pytest.mark.usefixtures("wide")
def test_run_with_progress_shows_the_latest_pip_line_while_the_command_runs(
    tmp_path: Path,
) -> None:
    log = tmp_path / "step.log"
    log.write_text("Collecting an-earlier-step\n", encoding="utf-8")
    script = "import time; print('Collecting regex', flush=True); time.sleep(0.6)"
    tty, lines = FakeTty(), list[str]()
    pace = pg.Pace(live_s=0.05)
    code = pg.run_with_progress(
        [sys.executable, "-c", script], log, "step 2/3", lines.append, stream=tty, pace=pace
    )
    assert code == 0
    assert re.search(r"\r  \d+ s · step 2/3 · Collecting regex\x1b\[K", tty.getvalue())
    assert "an-earlier-step" not in tty.getvalue()
    assert lines[0] == "step 2/3 …" and lines[-1].startswith("step 2/3: done in ")
    text = log.read_text(encoding="utf-8")
    assert f"$ {sys.executable} -c {script}\nCollecting regex\n" in text


def test_run_with_progress_says_plain_lines_with_the_latest_pip_line(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    script = (
        "import time; print('Collecting x'); print('  Downloading x-1.whl (2 MB)', flush=True);"
        "time.sleep(0.8); raise SystemExit(3)"
    )
    lines: list[str] = []
    pace = pg.Pace(live_s=0.02, plain_s=0.2)
    code = pg.run_with_progress(
        [sys.executable, "-c", script],
        log,
        "step 1/3",
        lines.append,
        stream=io.StringIO(),
        pace=pace,
    )
    assert code == 3
    still = [line for line in lines if line.startswith("… still step 1/3, ")]
    assert still and still[-1].endswith("; last: Downloading x-1.whl (2 MB)")
    assert lines[-1].startswith("step 1/3: failed after ")


# What vLLM's log holds while nothing listens on the span port (opentelemetry-exporter-otlp
# 1.45's messages, and the older "Failed to export spans"), after a line about the server.
SERVER_LINE = "(APIServer pid=7) INFO 12-06 04:00:00 [api_server.py:1] Starting vLLM API server"
SPAN_NOISE = [
    "(APIServer pid=7) WARNING 12-06 04:00:01 [http.py:229] Transient error "
    "HTTPConnectionPool(host='127.0.0.1', port=14318): Max retries exceeded with url: "
    "/v1/traces (Caused by NewConnectionError('Failed to establish a new connection: "
    "[Errno 111] Connection refused')) encountered while exporting span batch, retrying in "
    "1.02s.",
    "(APIServer pid=7) ERROR 12-06 04:00:09 [http.py:223] Failed to export span batch due to "
    "timeout, max retries or shutdown.",
    "(APIServer pid=7) ERROR 12-06 04:00:09 [http.py:214] Failed to export span batch code: "
    "None, reason: HTTPConnectionPool(host='127.0.0.1', port=14318)",
    "Failed to export spans.",
    "Exception while exporting Span.",
    "requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=14318): "
    "Max retries exceeded with url: /v1/traces",
]


def test_the_start_up_ticker_skips_vllms_span_export_noise(tmp_path: Path) -> None:
    from ttftscope.localserver import process
    from ttftscope.localstate import LocalServer

    log = tmp_path / "server.log"
    log.write_text("\n".join([SERVER_LINE, *SPAN_NOISE]) + "\n", encoding="utf-8")
    server = LocalServer("http://127.0.0.1:8000/v1", 8000, 1, "m", str(log))
    assert process._server_log_detail(server)() == SERVER_LINE
    for line in SPAN_NOISE:  # each alone is skipped, not only the last
        log.write_text(f"{SERVER_LINE}\n{line}\n", encoding="utf-8")
        assert process._server_log_detail(server)() == SERVER_LINE, line
    log.write_text(f"{SERVER_LINE}\nINFO: Application startup complete.\n", encoding="utf-8")
    assert process._server_log_detail(server)() == "INFO: Application startup complete."
