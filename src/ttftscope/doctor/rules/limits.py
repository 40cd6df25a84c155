"""What held requests in the server's queue, for the queue's remedy: a limit, not a guess.

vLLM does not publish ``--max-num-seqs`` in ``/metrics`` (0.32: ``vllm:cache_config_info``
holds the cache's settings only); ``/server_info`` has it when the server was started with
``VLLM_SERVER_DEV_MODE=1``, and the doctor reads it there when it can. Without it the
sampler still tells: requests that waited while the server ran fewer than it ran at other
times were not held back by the sequence limit (the KV cache or the tokens per step were),
and the most a workload ever ran at once is its own concurrency (its sessions), which says
nothing about the server's limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftscope.records import RequestRecord
from ttftscope.results.files import Sample
from ttftscope.results.runs import Run

__all__ = ["UNREAD", "Concurrency", "concurrency", "queue_remedy", "remedy_for"]

UNREAD = (
    "its --max-num-seqs cannot be seen (vLLM does not export it in /metrics and serves "
    "/server_info only with VLLM_SERVER_DEV_MODE=1): look for --max-num-seqs in the server's "
    "start command or in the 'non-default args' line of its log (absent there, it is "
    "vLLM's default for the hardware)"
)
FULL_KV = 0.8  # KV cache usage from which a full cache, not the step's budget, holds requests


def _held_back(kv_usage: float | None) -> str:
    """What held requests back when it was not the sequence limit."""
    if kv_usage is None:
        return (
            "not --max-num-seqs but the KV cache or the tokens per step "
            "(--max-num-batched-tokens) held them back: raise those (or "
            "--gpu-memory-utilization), or add a replica"
        )
    if kv_usage < FULL_KV:
        return (
            f"not --max-num-seqs, and the KV cache had room (usage peaked at {kv_usage:.0%}): "
            "the tokens per step (--max-num-batched-tokens) held them back: raise it, or add "
            "a replica"
        )
    return (
        f"not --max-num-seqs but a full KV cache (usage peaked at {kv_usage:.0%}): give it "
        "more space (--gpu-memory-utilization), or add a replica"
    )


@dataclass(frozen=True)
class Concurrency:
    """How many requests a run's servers ran and held, sample by sample.

    >>> c = Concurrency(peak_running=4, running_while_waiting=3, peak_in_flight=4)
    >>> c.held_below_peak
    True
    """

    peak_running: float | None = None  # the most running in one sample
    running_while_waiting: float | None = None  # the most running in a sample where some waited
    peak_in_flight: float | None = None  # the most running + waiting in one sample
    peak_kv_usage: float | None = None  # 0..1
    sessions: int | None = None  # the workload's own concurrency (bench sessions)

    @property
    def held_below_peak(self) -> bool:
        """Requests waited only while the server ran fewer than it ran at other times."""
        seen, peak = self.running_while_waiting, self.peak_running
        return seen is not None and peak is not None and seen < peak


def _peak(values: list[float]) -> float | None:
    return max(values) if values else None


def _sessions(records: tuple[RequestRecord, ...]) -> int | None:
    sessions = {r.session for r in records if r.session is not None}
    return len(sessions) or None


def concurrency(run: Run) -> Concurrency:
    """The run's samples (``/metrics`` every ~250 ms) and its workload's sessions.

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> s = (Sample(t=0, running=4, waiting=0), Sample(t=1, running=3, waiting=1))
    >>> part = RunPart(kind="bench", key="k", label="b", source=Path("d"), samples=s)
    >>> c = concurrency(Run(kind="bench", key="k", label="b", parts=(part,)))
    >>> c.peak_running, c.running_while_waiting, c.peak_in_flight
    (4.0, 3.0, 4.0)
    """
    samples: list[Sample] = [s for s in run.samples if s.ok and s.running is not None]
    waited = [s.running or 0.0 for s in samples if (s.waiting or 0.0) > 0]
    return Concurrency(
        peak_running=_peak([s.running or 0.0 for s in samples]),
        running_while_waiting=_peak(waited),
        peak_in_flight=_peak([(s.running or 0.0) + (s.waiting or 0.0) for s in samples]),
        peak_kv_usage=_peak([s.kv_usage for s in run.samples if s.ok and s.kv_usage is not None]),
        sessions=_sessions(run.records) if run.kind == "bench" else None,
    )


def _own_concurrency(c: Concurrency) -> str:
    if c.sessions is None or c.peak_running is None or c.peak_running < c.sessions:
        return ""
    return (
        f" ({c.peak_running:.0f} is the workload's own concurrency, its {c.sessions} "
        "sessions, not a limit of the server)"
    )


def queue_remedy(run: Run, limit: int | None) -> str:
    """What to change, from the server's ``--max-num-seqs`` when read, else from the samples.

    >>> queue_remedy(Run(kind="probe", key="k", label="p", parts=()), None)[:34]
    'its --max-num-seqs cannot be seen '
    """
    return remedy_for(concurrency(run), limit)


def remedy_for(c: Concurrency, limit: int | None) -> str:
    """What to change, given how many ran and waited (a run's samples or a live window).

    >>> remedy_for(Concurrency(peak_running=4, running_while_waiting=4), 4)[:42]
    'the server ran up to its --max-num-seqs 4 '
    """
    kv = "" if c.peak_kv_usage is None else f" (usage peaked at {c.peak_kv_usage:.0%})"
    seen = c.running_while_waiting
    want = int(max(c.peak_in_flight or 0.0, (limit or 0) + 1))
    raise_seqs = (
        f"start it with --max-num-seqs {want} or more if the KV cache{kv} has room, "
        "otherwise add a replica"
    )
    if limit is not None:
        where = f"its --max-num-seqs {limit} (from /server_info)"
        if seen is not None and seen < limit:
            return f"requests waited while {seen:.0f} ran, below {where}: " + _held_back(
                c.peak_kv_usage
            )
        return f"the server ran up to {where} at once while requests waited: {raise_seqs}"
    if seen is None or c.peak_running is None:
        return (
            f"{UNREAD}; no /metrics samples show how many ran while requests waited: raise "
            "vLLM's --max-num-seqs if the KV cache has room, or add replicas"
        )
    own = _own_concurrency(c)
    if c.held_below_peak or own:
        lead = (
            f"requests waited while at most {seen:.0f} ran, fewer than the "
            f"{c.peak_running:.0f} it ran at other times"
            if c.held_below_peak
            else f"the server ran up to {c.peak_running:.0f} at once"
        )
        return f"{lead}{own}: " + _held_back(c.peak_kv_usage)
    # the action last: the saving printed after the remedy is what it buys
    return (
        f"the server ran at most {c.peak_running:.0f} at once while requests waited, and "
        f"{UNREAD}; if it is {c.peak_running:.0f}, {raise_seqs}"
    )
