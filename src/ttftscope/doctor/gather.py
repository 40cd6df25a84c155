"""What the doctor looks at: result directories, request logs, and the live endpoint.

Nothing here judges; it collects, and says in ``notes`` what it could not collect and why
(a server that did not answer is a note, not a crash: the other evidence still counts).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ttftscope.client.endpoint import Endpoint
from ttftscope.client.http_json import call_json
from ttftscope.config.loader import LoadedSettings
from ttftscope.doctor.sampling import LiveSamples, Sampling, sample_queue
from ttftscope.doctor.serverfacts import (
    GatewayFacts,
    ServerFacts,
    gateway_facts,
    max_num_seqs,
    server_facts,
)
from ttftscope.errors import TtftscopeError
from ttftscope.metrics.scrape import ascrape_metrics
from ttftscope.results.runs import Run, load_runs

__all__ = [
    "Live",
    "Recorded",
    "gateway_metrics_url",
    "read_live",
    "read_recorded",
    "recorded_runs",
]


@dataclass
class Recorded:
    """Runs read from ``--records`` paths and the request logs found beside them."""

    runs: list[Run] = field(default_factory=list)
    request_logs: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _is_request_log(path: Path) -> bool:
    return path.suffix == ".jsonl" and path.name.startswith(("requests", "gateway-requests"))


def _logs_in(paths: Sequence[Path], extra_logs: Sequence[Path]) -> list[Path]:
    """Request logs given as files, found in the given directories, or configured."""
    out: list[Path] = []
    for path in paths:
        if path.is_file() and _is_request_log(path):
            out.append(path)
        elif path.is_dir():
            out += sorted(p for p in path.glob("*.jsonl") if _is_request_log(p))
    return out + [p for p in extra_logs if p.is_file() and p not in out]


def read_recorded(paths: Sequence[Path], extra_logs: Sequence[Path] = ()) -> Recorded:
    """Read result directories and record files; collect request logs (``requests*.jsonl``).

    A path that holds only a request log is fine: dynamic prefixes need nothing else.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "requests.jsonl").write_text('{"prompt": "hi"}\\n')
    >>> got = read_recorded([d]); got.runs, [p.name for p in got.request_logs]
    ([], ['requests.jsonl'])
    """
    out = Recorded(request_logs=_logs_in(paths, ()))
    for path in paths:
        if path.is_file() and _is_request_log(path):
            continue
        try:
            out.runs += load_runs([path])
        except TtftscopeError as exc:
            if not out.request_logs or not path.is_dir():
                raise
            out.notes.append(f"{path}: {exc.message}")
    out.request_logs += [p for p in extra_logs if p.is_file() and p not in out.request_logs]
    for run in out.runs:
        out.notes += list(run.notes)
    return out


def recorded_runs(
    runs: Sequence[Run], paths: Sequence[Path], extra_logs: Sequence[Path] = ()
) -> Recorded:
    """Runs already read from ``paths`` (``report`` reads them once), with the request logs.

    >>> recorded_runs([], []).runs
    []
    """
    return Recorded(
        runs=list(runs),
        request_logs=_logs_in(paths, extra_logs),
        notes=[n for run in runs for n in run.notes],
    )


@dataclass
class Live:
    """What the configured endpoint (and gateway, if any) said just now."""

    server: ServerFacts | None = None
    gateway: GatewayFacts | None = None
    served_models: tuple[str, ...] | None = None
    samples: LiveSamples | None = None  # the queue over a few seconds, when sampled
    checked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def gateway_metrics_url(loaded: LoadedSettings) -> str | None:
    """The configured gateway's ``/metrics``, when a gateway is configured.

    >>> from ttftscope.config.loader import load_settings
    >>> gateway_metrics_url(load_settings(env={}, cwd=Path("/nonexistent"))) is None
    True
    """
    gw = loaded.settings.gateway
    if not gw.upstreams:
        return None
    host = "127.0.0.1" if gw.host in ("0.0.0.0", "::", "") else gw.host
    return f"http://{host}:{gw.port}/metrics"


async def _server(
    ep: Endpoint, live: Live, client: httpx.AsyncClient, sampling: Sampling | None
) -> None:
    headers = ep.scrape_headers()
    try:
        snap = await ascrape_metrics(ep.metrics_url, client=client, headers=headers)
    except TtftscopeError as exc:
        live.notes.append(f"/metrics not read: {exc.message}")
        return
    live.server = server_facts(snap, ep.metrics_url)
    live.checked.append(f"server metrics ({ep.metrics_url})")
    seqs = await _max_num_seqs(ep, client)
    if seqs is not None:
        live.server = dataclasses.replace(live.server, max_num_seqs=seqs)
        live.checked.append(f"the server's --max-num-seqs ({ep.root}/server_info)")
    live.checked.append(f"the server's limits: {live.server.limits()}")
    if sampling is not None and sampling.seconds > 0:
        live.samples = await sample_queue(ep.metrics_url, client, sampling, headers)
        live.notes += live.samples.notes
        live.checked.append(
            f"the server's queue, {len(live.samples.samples)} /metrics scrapes in "
            f"{live.samples.seconds:.1f} s"
        )


async def _max_num_seqs(ep: Endpoint, client: httpx.AsyncClient) -> int | None:
    """The server's ``--max-num-seqs`` from vLLM's ``/server_info``, if it serves one.

    Only a server started with ``VLLM_SERVER_DEV_MODE=1`` does; elsewhere it is a 404, and
    the queue's remedy says the limit cannot be seen.
    """
    try:
        _, data = await call_json(
            client,
            "GET",
            f"{ep.root}/server_info?config_format=json",
            api_key=ep.api_key,
            timeout_s=min(ep.timeout_s, 5.0),
            headers=ep.headers,
        )
    except TtftscopeError:
        return None
    return max_num_seqs(data)


async def _models(ep: Endpoint, live: Live, client: httpx.AsyncClient) -> None:
    try:
        live.served_models = tuple(await ep.list_models(client))
    except TtftscopeError as exc:
        live.notes.append(f"{ep.base_url}/models not read: {exc.message}")
        return
    live.checked.append(f"served models ({ep.base_url}/models)")


async def _gateway(url: str, live: Live, client: httpx.AsyncClient) -> None:
    try:
        snap = await ascrape_metrics(url, client=client)
    except TtftscopeError as exc:
        live.notes.append(
            f"gateway metrics not read (is `ttftscope gateway` running?): {exc.message}"
        )
        return
    live.gateway = gateway_facts(snap, url)
    live.checked.append(f"gateway metrics ({url})")


async def read_live(ep: Endpoint, loaded: LoadedSettings, sampling: Sampling | None = None) -> Live:
    """Scrape the server's ``/metrics`` (over ``sampling``'s window, when given), list its
    models, and scrape the gateway's metrics."""
    live = Live()
    async with httpx.AsyncClient(timeout=min(ep.timeout_s, 10.0)) as client:
        jobs = [_server(ep, live, client, sampling), _models(ep, live, client)]
        url = gateway_metrics_url(loaded)
        if url is not None:
            jobs.append(_gateway(url, live, client))
        await asyncio.gather(*jobs)
    return live
