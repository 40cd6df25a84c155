"""Shadow checks run on the runner they are given, and a busy runner skips them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tokenization.shadow import ShadowChecks


def test_checks_run_on_the_given_runner_and_count_mismatches() -> None:
    ran: list[bool] = []

    def runner(job: Callable[[], bool]) -> Future[bool]:
        future: Future[bool] = Future()
        ran.append(True)
        future.set_result(job())
        return future

    checks = ShadowChecks(runner)
    assert checks.submit(lambda: [1, 2], [1, 2]) and checks.submit(lambda: [1, 2], [1, 3])
    assert ran == [True, True] and checks.collect(wait=True) == (2, 1)


def test_an_encoder_counts_the_checks_a_busy_runner_skipped(
    load_family: Callable[[str], Tokenizer],
) -> None:
    enc = IncrementalEncoder(load_family("qwen2"), shadow_every=1, shadow_runner=lambda job: None)
    enc.encode("hello world")
    forked = enc.fork()  # a fork keeps the runner
    forked.encode("hello world, again")
    enc.flush()
    assert (enc.stats.shadow_skipped, enc.stats.shadow_checks) == (1, 0)
    assert forked.stats.shadow_skipped == 1
