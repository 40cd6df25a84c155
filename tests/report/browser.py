"""Open a report in Debian's headless Chromium (driven by playwright) and say what rendered.

Playwright never downloads a browser here: it drives ``/usr/bin/chromium`` (installed by
``scripts/install_browser.sh``) with a fresh profile, offline, and every request that is not
for a local file is aborted and recorded, so a page that needs the network fails visibly.

Also a tool: ``python -m tests.report.browser REPORT.html OUT.png [--first-screen]`` saves a
screenshot (the whole page, every section opened; or the first screen, as it opens).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import ConsoleMessage, Route, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# per plot: traces plotly holds, SVG roots, drawn trace groups, drawn marks (lines, points,
# bars), and which labels a reader would see drawn over each other: the legend, the menu, axis
# titles and subplot titles, compared by the boxes the browser laid them out in
# the ids of the plots drawn outside any closed <details>, and the folded sections' summaries
_FOLDED_JS = """() => ({
  visible: Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(el => !el.closest('details:not([open])')).map(el => el.id),
  summaries: Array.from(document.querySelectorAll('details > summary')).map(s => s.textContent),
  verdict: (document.querySelector('#verdict') || {}).textContent || null,
  verdictTop: (document.querySelector('#verdict') || {getBoundingClientRect: () => ({top: -1})})
    .getBoundingClientRect().top,
})"""
_OPEN_JS = "() => document.querySelectorAll('details').forEach(d => { d.open = true; })"
_PLOTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => {
  const boxes = [];
  const add = (sel, what) => el.querySelectorAll(sel).forEach((n, i) => {
    const r = n.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) boxes.push({what: `${what}${i}`, r});
  });
  add('g.legend', 'legend');
  add('g.updatemenu-container', 'menu');
  add('g.infolayer [class^="g-x"][class$="title"] text', 'x-title');
  add('g.infolayer [class^="g-y"][class$="title"] text', 'y-title');
  add('g.annotation', 'subplot-title');
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
    a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const overlaps = [];
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
    if (hit(a.r, b.r)) overlaps.push(`${a.what} × ${b.what}`);
  }));
  return {
    id: el.id,
    traces: (el.data || []).length,
    shown: (el.data || []).filter(t => t.visible !== false).length,
    svgs: el.querySelectorAll('svg.main-svg').length,
    drawn: el.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,
    marks: el.querySelectorAll(
      '.scatterlayer path.js-line, .scatterlayer path.point, .barlayer path').length,
    overlaps,
  };
})"""
_READY_JS = """(n) => {
  const plots = document.querySelectorAll('.js-plotly-plot');
  return plots.length >= n && Array.from(plots).every(p => p.querySelector('svg.main-svg'));
}"""


@dataclass(frozen=True)
class PlotState:
    """What one plot drew."""

    id: str
    traces: int
    shown: int  # traces drawn before any click (the rest behind the legend or a menu)
    svgs: int
    drawn: int
    marks: int
    overlaps: list[str]  # labels drawn over each other ("legend0 × x-title0")

    @property
    def has_data(self) -> bool:
        """An SVG with at least one drawn trace that has marks in it."""
        return self.svgs > 0 and self.traces > 0 and self.drawn > 0 and self.marks > 0


@dataclass
class PageState:
    """What the page did: its plots, console errors, uncaught errors, network attempts."""

    plots: list[PlotState] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    # before anything was opened: visible plot ids, the folded sections, the verdict and its top
    folded: dict[str, Any] = field(default_factory=dict)


def browser_available() -> bool:
    """Whether Debian's chromium is installed where the tests drive it."""
    return CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)


def open_report(
    path: Path,
    *,
    expect_plots: int,
    screenshot: Path | None = None,
    width: int = 1280,
    first_screen: bool = False,
) -> PageState:
    """Load ``path`` from ``file://`` with the network closed; wait for ``expect_plots``."""
    state = PageState()

    def block(route: Route) -> None:
        url = route.request.url
        if url.startswith("file://") or url.startswith("data:"):
            route.continue_()
        else:
            state.network.append(url)
            route.abort()

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            state.console_errors.append(msg.text)

    with (
        tempfile.TemporaryDirectory(prefix="ttftscope-chromium-") as profile,
        sync_playwright() as pw,
    ):
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            offline=True,
            viewport={"width": width, "height": 900},
        )
        try:
            context.route("**/*", block)
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", on_console)
            page.on("pageerror", lambda exc: state.page_errors.append(str(exc)))
            page.goto(path.resolve().as_uri(), wait_until="load")
            page.wait_for_function(_READY_JS, arg=expect_plots, timeout=15_000)
            if screenshot is not None and first_screen:  # as a reader first sees it
                page.screenshot(path=str(screenshot), full_page=False)
            state.folded = page.evaluate(_FOLDED_JS)
            page.evaluate(_OPEN_JS)  # every folded section open, as a reader who reads on
            page.wait_for_timeout(200)  # let responsive relayouts settle before reading
            state.plots = [PlotState(**p) for p in page.evaluate(_PLOTS_JS)]
            if screenshot is not None and not first_screen:
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            context.close()
    return state


if __name__ == "__main__":
    first = "--first-screen" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--first-screen"]
    got = open_report(Path(args[0]), expect_plots=1, screenshot=Path(args[1]), first_screen=first)
    print(got)
