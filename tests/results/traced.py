"""Records as bench writes them once traces fill the server's parts, next to old-style ones.

``traced`` records carry spans and ``part_sources`` 'span'; ``histogram`` ones have the parts
with their source told as a /metrics histogram; ``old`` ones have no server figure at all
(a bench before traces, under concurrency).
"""

from __future__ import annotations

from pathlib import Path

from ttftscope.records import RequestRecord, SpanTiming
from ttftscope.results.runs import Run, RunPart

SPAN_SOURCES = {
    "server_ttft_ms": "span",
    "queue_ms": "span",
    "prefill_ms": "span",
    "server_frontend_ms": "span",
}


def traced(
    index: int,
    *,
    queue: float,
    prefill: float,
    frontend: float,
    outside: float,
    gateway: float | None = None,
    target: str = "gateway",
    prompt_tokens: int = 9000,
    sources: str = "span",
    spans: list[SpanTiming] | None = None,
    **fields: object,
) -> RequestRecord:
    """A request whose server parts are given, their source told as ``sources``."""
    server = frontend + queue + prefill
    parts: dict[str, object] = {
        "serialize_ms": 0.0,
        "server_ttft_ms": server,
        "queue_ms": queue,
        "prefill_ms": prefill,
        "server_frontend_ms": frontend,
        "outside_server_ms": outside,
        "gateway_ms": gateway,
        "part_sources": {k: sources for k in SPAN_SOURCES},
        "spans": spans or [],
    }
    # the caller's fields win, as they would in one dict
    return old(
        index,
        ttft=server + outside,
        target=target,
        prompt_tokens=prompt_tokens,
        **{**parts, **fields},
    )


def old(
    index: int,
    *,
    ttft: float = 100.0,
    target: str = "gateway",
    prompt_tokens: int = 9000,
    **fields: object,
) -> RequestRecord:
    """A request with the client's view only (no trace, no per-request server figures),
    plus whatever ``fields`` say."""
    return RequestRecord.model_validate(
        {
            "run_id": "bench-t",
            "index": index,
            "variant": "chat",
            "phase": "warm",
            "ok": True,
            "target": target,
            "context_tokens_target": prompt_tokens - 500,
            "prompt_tokens": prompt_tokens,
            "wire_ttft_ms": ttft,
            "client_ttft_ms": ttft,
            **fields,
        }
    )


def bench_run(records: list[RequestRecord], label: str = "bench-t") -> Run:
    """The records as one bench run."""
    part = RunPart(kind="bench", key=label, label=label, source=Path("d"), records=tuple(records))
    return Run(kind="bench", key=label, label=label, parts=(part,))


def mixed() -> list[RequestRecord]:
    """Gateway at 8K–16K: four traced requests and one old-style one; direct at 16K–32K: two
    requests whose parts came from histograms (and no gateway)."""
    gateway = [
        traced(i, queue=q, prefill=p, frontend=2.0, outside=o, gateway=g)
        for i, (q, p, o, g) in enumerate(
            [
                (40.0, 200.0, 8.0, 4.0),
                (10.0, 100.0, 5.0, 1.0),
                (30.0, 120.0, 7.0, 3.0),
                (20.0, 110.0, 6.0, 2.0),
            ]
        )
    ]
    direct = [
        traced(
            10 + i,
            queue=q,
            prefill=50.0,
            frontend=1.0,
            outside=3.0,
            target="direct",
            prompt_tokens=20_000,
            sources="histogram",
        )
        for i, q in enumerate((0.0, 4.0))
    ]
    return [*gateway, old(9), *direct]
