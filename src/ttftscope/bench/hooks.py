"""What a display hears while a bench runs: stages, notes, warm-ups, records and samples.

>>> seen = []
>>> Hooks(on_warmup=lambda done, total: seen.append(f"{done}/{total}")).warmup(1, 2)
>>> Hooks().warmup(1, 2), seen
(None, ['1/2'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttftscope.bench.observe.sampler import ScrapeSample
from ttftscope.records import RequestRecord


@dataclass
class Hooks:
    """What a display wants to hear while the run goes (all optional)."""

    on_stage: Callable[[str], None] | None = None
    on_start: Callable[[int], None] | None = None  # measured requests planned
    on_record: Callable[[RequestRecord], None] | None = None
    on_sample: Callable[[ScrapeSample], None] | None = None
    on_note: Callable[[str], None] | None = None  # a line to keep (the workload was changed)
    on_warmup: Callable[[int, int], None] | None = None  # warm-ups sent so far, of how many

    def stage(self, text: str) -> None:
        """Say what the run does now."""
        if self.on_stage is not None:
            self.on_stage(text)

    def note(self, text: str) -> None:
        """Say what changed, as a line to keep."""
        if self.on_note is not None:
            self.on_note(text)

    def warmup(self, done: int, total: int) -> None:
        """Say that ``done`` of the ``total`` warm-up requests were sent (0: they begin)."""
        if self.on_warmup is not None:
            self.on_warmup(done, total)
