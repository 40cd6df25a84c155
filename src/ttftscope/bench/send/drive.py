"""The measured phase: session workers that pace, cap, send, retry and stop by themselves.

``--sessions`` workers each take a conversation and send its turns in order (a turn goes
once the previous one is answered and its think time has passed), through the shared
Poisson pacer and concurrency slots. The phase ends when every conversation is done, at
the ``--duration`` deadline (requests in flight may finish within ``drain_s``; the rest are
cancelled and counted), or at the first failure that every later request would repeat
(unreachable server, bad key, wrong model, not an API): then in-flight requests get a
second to end and the run stops with that failure (:class:`Abort`).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ttftscope.bench.plan.bodies import BodyDefaults
from ttftscope.bench.plan.conversations import Conversation
from ttftscope.bench.plan.workload import TurnPlan
from ttftscope.bench.send.pacing import Pacer, Slots, sleep_until
from ttftscope.bench.send.request import Attempt, Sent, send
from ttftscope.bench.send.transport import StreamClient
from ttftscope.bench.targets import Target
from ttftscope.client.stream import StreamResult
from ttftscope.errors import UNREACHABLE_KINDS, FailureKind
from ttftscope.records import Phase

# Failures that make every later request fail the same way: stop and say so.
FATAL = UNREACHABLE_KINDS | {
    FailureKind.AUTH_ERROR,
    FailureKind.NOT_FOUND,
    FailureKind.BAD_RESPONSE,
}
MAX_ATTEMPTS = 3  # with --honour-retry-after: a 429 is retried at most twice
MAX_RETRY_AFTER_S = 300.0
ABORT_GRACE_S = 1.0


def retry_after_s(value: str | None, now: float | None = None) -> float:
    """Seconds a ``Retry-After`` header asks for (seconds or an HTTP date), bounded.

    >>> retry_after_s("2.5"), retry_after_s(None), retry_after_s("Thu, 01 Jan 1970 00:00:10 GMT", 0)
    (2.5, 1.0, 10.0)
    """
    if value is None:
        return 1.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return 1.0
        seconds = when - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return 1.0
    return min(MAX_RETRY_AFTER_S, max(0.0, seconds))


@dataclass(frozen=True)
class Abort:
    """The failure that stopped the run, on which target."""

    target: str
    base_url: str
    result: StreamResult


@dataclass(frozen=True)
class DriveConfig:
    """What the measured phase needs besides its conversations."""

    run_id: str
    shard: str
    defaults: BodyDefaults
    timeout_s: float
    workers: int
    deadline: float  # monotonic
    drain_s: float
    honour_retry_after: bool = False


class Driver:
    """Runs conversations against targets; hands every finished request to ``emit``."""

    def __init__(
        self,
        connect: Callable[[], StreamClient],
        targets: Sequence[Target],
        cfg: DriveConfig,
        *,
        pacer: Pacer,
        slots: Slots,
        emit: Callable[[Sent], None],
        waiting: Callable[[str], float | None] = lambda _name: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connect, self.targets, self.cfg = connect, targets, cfg
        self.pacer, self.slots, self.emit, self.waiting = pacer, slots, emit, waiting
        self.clock = clock
        self.stop = asyncio.Event()
        self.abort: Abort | None = None
        self.cancelled = 0
        self._paused: dict[str, float] = {}

    def _stopping(self) -> bool:
        return self.stop.is_set() or self.clock() >= self.cfg.deadline

    async def run(self, conversations: Sequence[Conversation]) -> None:
        """Run until every conversation is done, the deadline passes or a fatal failure."""
        queue = deque(conversations)
        workers = [
            asyncio.create_task(self._worker(queue))
            for _ in range(min(self.cfg.workers, len(conversations)))
        ]
        try:
            await self._supervise(workers)
        except asyncio.CancelledError:  # Ctrl-C: stop sending, keep what finished
            self.stop.set()
            self.cancelled = self.slots.in_flight
            await self._cancel(workers)
            raise
        for task in workers:
            exc = None if task.cancelled() else task.exception()
            if exc is not None:  # a bug in a worker: never hide it behind a partial result
                raise exc

    async def _supervise(self, workers: list[asyncio.Task[None]]) -> None:
        pending = set(workers)
        while pending and not self._stopping():
            left = self.cfg.deadline - self.clock()
            _, pending = await asyncio.wait(pending, timeout=min(max(left, 0.0), 0.25))
        self.stop.set()
        if pending:
            grace = ABORT_GRACE_S if self.abort is not None else self.cfg.drain_s
            _, pending = await asyncio.wait(pending, timeout=grace)
        self.cancelled = self.slots.in_flight
        await self._cancel(list(pending))

    async def _cancel(self, tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self, queue: deque[Conversation]) -> None:
        async with self.connect() as client:
            while queue and not self._stopping():
                await self._conversation(client, queue.popleft())

    async def _conversation(self, client: StreamClient, conv: Conversation) -> None:
        for turn in conv.plan.turns:
            if turn.think_s > 0:
                wake = min(self.clock() + turn.think_s, self.cfg.deadline)
                if not await sleep_until(wake, self.stop, self.clock):
                    return
            if self._stopping() or not await self.pacer.wait(self.cfg.deadline, self.stop):
                return
            await self._request(client, conv, turn)

    async def _request(self, client: StreamClient, conv: Conversation, turn: TurnPlan) -> None:
        target = self.targets[turn.target]
        body = conv.body(turn, self.cfg.defaults)
        phase: Phase = "cold" if turn.turn == 0 else "warm"
        for attempt in range(1, MAX_ATTEMPTS + 1):
            pause = self._paused.get(target.name, 0.0)
            if pause > self.clock() and not await sleep_until(
                min(pause, self.cfg.deadline), self.stop, self.clock
            ):
                return
            if self._stopping():
                return
            who = Attempt(
                self.cfg.run_id,
                self.cfg.shard,
                target,
                turn,
                phase,
                conv.plan.context_tokens,
                attempt,
                api=self.cfg.defaults.api,
            )
            async with self.slots.hold() as waited_ms:
                waiting = self.waiting(target.name)
                sent = await send(client, who, body, timeout_s=self.cfg.timeout_s)
            sent.record.queue_wait_ms, sent.record.waiting_before = waited_ms, waiting
            self.emit(sent)
            if not self._should_retry(target, sent.result):
                return

    def _should_retry(self, target: Target, result: StreamResult) -> bool:
        if result.error_kind in FATAL and self.abort is None:
            self.abort = Abort(target.name, target.base_url, result)
            self.stop.set()
        if result.error_kind is not FailureKind.RATE_LIMITED or not self.cfg.honour_retry_after:
            return False
        # the limit is the key's, not the session's: every request to this target waits
        until = self.clock() + retry_after_s(result.retry_after)
        self._paused[target.name] = max(self._paused.get(target.name, 0.0), until)
        return True
