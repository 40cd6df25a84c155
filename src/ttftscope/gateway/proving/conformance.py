"""Each upstream proves, shape class by shape class, that it renders as the gateway does.

At start-up, and again when its ``GET /version`` answer changes (:func:`watch_versions`),
every ids upstream renders the fixed corpus (:mod:`~ttftscope.gateway.proving.corpus`: one body per
API and shape class) twice: locally (:func:`~ttftscope.gateway.proving.converts.local_prompt`, what
the endpoints serve) and through its own rendering (:mod:`~ttftscope.gateway.proving.oracle`). A
class goes as ids where the two agree and the upstream takes ids on that API; every other
class goes as text, and :class:`~ttftscope.gateway.pipeline.shapes.ShapeTable` says why. Optional
profile rules (what hangs on the server's transformers version) are decided here: the
variant the server's answers match best is kept.

Versions: vLLM 0.32 and newer (an unknown newer release included) are checked; older ones and
servers that are not vLLM stay text. vLLM's Rust front end (``rust_frontend_version`` in
``/version``) renders with MiniJinja and may ignore ``prompt_token_ids``: there a class goes
as ids only where a 1-token probe proves the server used the ids.

>>> line = summary_line(UpstreamCheck("u", "http://h/v1", "0.35.0", "0.35 (as 0.34)", None,
...     "chat-ids", ShapeTable({("chat", "plain"): Verdict(True, "render: equal", "render")})))
>>> line.split("; ")[0]
'upstream u: vLLM 0.35.0, profile 0.35 (as 0.34), front end python, ids via chat-ids'
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from dataclasses import dataclass

from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.profiles import profile_for
from ttftscope.gateway.pipeline.shapes import SHAPES, NativeApi, Oracle, ShapeTable, Verdict
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.proving import oracle
from ttftscope.gateway.proving.converts import local_prompt
from ttftscope.gateway.proving.corpus import corpus_body
from ttftscope.gateway.proving.oracle import Routes, Theirs, ask

__all__ = [
    "StartupChecks", "UpstreamCheck", "check_upstream", "publish", "summary_line",
    "watch_versions",
]  # fmt: skip

log = logging.getLogger("ttftscope.gateway")
CHECK_BUDGET_S = 30.0  # the whole check of one upstream
Key = tuple[NativeApi, str]


@dataclass(frozen=True)
class UpstreamCheck:
    """What the check found on one upstream (``gateway check`` prints it)."""

    name: str
    base_url: str
    version: str | None
    profile: str | None
    frontend: str | None  # rust_frontend_version, None: Python
    api: str | None  # how ids travel (None: text)
    table: ShapeTable
    reason: str = ""  # why nothing was checked, if so
    api_reason: str = ""  # what the ids-API probes found


@dataclass(frozen=True)
class _Local:
    ids: list[int] | None
    chat: dict[str, object] | None
    reason: str = ""  # the gateway's own pass-through


def _channel(up: Upstream, api: NativeApi) -> str | None:
    """Why ``api``'s ids cannot reach ``up`` (None: they can)."""
    if up.api is None:
        return "no ids channel (the ids-API probes failed)"  # their answers: api_reason
    if api != "chat" and up.api != "chat-ids":
        return f"{api} takes ids only where chat-ids is proven (here: {up.api})"
    return None


def _local(up: Upstream, api: NativeApi, shape: str) -> _Local:
    assert up.tok is not None
    try:
        chat, prompt = local_prompt(up, api, corpus_body(api, shape, up.models[0]))
    except PassThrough as exc:
        return _Local(None, None, exc.reason)
    return _Local(up.tok.encode(prompt), chat)


def _judge(local: _Local, theirs: Theirs, channel: str | None) -> Verdict:
    """One class's verdict from the gateway's render and the upstream's answer."""
    if local.ids is None:
        return Verdict(False, f"the gateway sends it as text ({local.reason})", "local")
    if theirs.oracle == "none":
        return Verdict(False, f"not proven ({theirs.why})", "none")
    if theirs.oracle == "probe":
        ok, why = theirs.used, f"probe: {theirs.why}"
    elif theirs.ids is None:
        ok, why = False, f"{theirs.oracle}: {theirs.why}"
    else:
        ok, why = _compare(local.ids, theirs.ids)
        why = f"{theirs.oracle}: {why}"
    if ok and channel is not None:
        return Verdict(False, why, theirs.oracle, blocked=channel)
    return Verdict(ok, why, theirs.oracle)


def _compare(ours: list[int], theirs: list[int]) -> tuple[bool, str]:
    if ours == theirs:
        return True, f"equal ({len(ours)} ids)"
    n = min(len(ours), len(theirs))
    at = next((i for i in range(n) if ours[i] != theirs[i]), n)
    return False, f"differs at token {at} ({len(ours)} ids ours, {len(theirs)} theirs)"


def _text_table(why: str, oracle: Oracle = "none") -> ShapeTable:
    return ShapeTable(
        {(api, s): Verdict(False, why, oracle) for api in SHAPES for s in SHAPES[api]}
    )


async def check_upstream(up: Upstream, *, budget_s: float = CHECK_BUDGET_S) -> UpstreamCheck:
    """Prove ``up``'s shape classes (sets ``up.shapes`` and, for optional rules, ``up.profile``)."""
    reason = _unchecked(up)
    if reason:
        up.shapes = _text_table(reason)
        return _result(up, reason)
    deadline = time.monotonic() + budget_s
    routes = Routes(up.unserved, timeout_s=oracle.CHECK_TIMEOUT_S, deadline=deadline)
    order: tuple[Oracle, ...] = ("probe",) if up.frontend else ("render", "tokenize", "probe")
    theirs: dict[Key, Theirs] = {}
    locals_: dict[Key, _Local] = {}
    for api in SHAPES:
        for shape in SHAPES[api]:
            local = locals_[(api, shape)] = _local(up, api, shape)
            if local.ids is None or local.chat is None:
                continue
            native = corpus_body(api, shape, up.models[0])
            theirs[(api, shape)] = await ask(up, api, native, local.chat, local.ids, routes, order)
    up.shapes = _best(up, locals_, theirs)
    return _result(up)


def _unchecked(up: Upstream) -> str:
    """Why ``up`` is not checked at all (it then goes as text), or ''."""
    if up.settings.mode != "ids":
        return "mode text"
    if profile_for(up.version) is None:
        return f"version {up.version or 'unknown'}: not vLLM 0.32 or newer"
    if up.tok is None or not up.models:
        return "no models listed"
    return ""


def _verdicts(
    up: Upstream, locals_: dict[Key, _Local], theirs: dict[Key, Theirs]
) -> dict[Key, Verdict]:
    none = Theirs("none", why="not asked")
    return {
        key: _judge(local, theirs.get(key, none), _channel(up, key[0]))
        for key, local in locals_.items()
    }


def _best(up: Upstream, locals_: dict[Key, _Local], theirs: dict[Key, Theirs]) -> ShapeTable:
    """The verdicts of the profile variant the upstream's answers match best."""
    best = _verdicts(up, locals_, theirs)
    if all(v.ids or v.oracle in ("local", "none", "probe") for v in best.values()):
        return ShapeTable(best)
    for rule in up.profile.optional:
        trial = copy.copy(up)
        trial.profile = up.profile.without(rule)
        again = {k: _local(trial, k[0], k[1]) for k in theirs}
        found = _verdicts(trial, {**locals_, **again}, theirs)
        if sum(v.ids for v in found.values()) > sum(v.ids for v in best.values()):
            up.profile, locals_, best = trial.profile, {**locals_, **again}, found
            log.info("upstream %s: profile rule %s off (the server renders without)", up.name, rule)
    return ShapeTable(best)


def _result(up: Upstream, reason: str = "") -> UpstreamCheck:
    assert up.shapes is not None
    checked = up.settings.mode == "ids" and profile_for(up.version) is not None
    profile = up.profile.name if checked else None
    return UpstreamCheck(
        up.name,
        up.settings.base_url,
        up.version,
        profile,
        up.frontend,
        up.api,
        up.shapes,
        reason,
        up.api_reason.strip(),
    )


def summary_line(c: UpstreamCheck) -> str:
    """The check of one upstream in one log line (no keys: the URL is not in it)."""
    front = f"rust {c.frontend}" if c.frontend else "python"
    head = (
        f"upstream {c.name}: vLLM {c.version or 'unknown'}, profile {c.profile or 'none'}, "
        f"front end {front}, ids via {c.api or 'none (text)'} {c.api_reason}".rstrip()
    )
    if c.reason:
        return f"{head}; all text ({c.reason})"
    v = c.table.verdicts
    per = ", ".join(f"{api} {c.table.ids_of(api)}/{len(SHAPES[api])}" for api in SHAPES)
    text = sorted(
        f"{a}.{s}" for (a, s), x in v.items() if not (x.ids or x.blocked or x.oracle == "local")
    )
    tail = f"; text (unproven): {', '.join(text)}" if text else ""
    blocked = sorted({x.blocked for x in v.values() if x.blocked})
    tail += "".join(f"; text ({b})" for b in blocked)
    return f"{head}; ids {c.table.ids_count()} of {len(v)} shape classes ({per}){tail}"


def publish(metrics: GatewayMetrics, checks: list[UpstreamCheck]) -> None:
    """The version and per-shape gauges for ``checks`` (the previous values replaced)."""
    metrics.upstream_version.clear()
    metrics.shape_ids.clear()
    for c in checks:
        ids = "yes" if c.table.ids_count() else "no"
        metrics.upstream_version.labels(c.name, c.version or "unknown", ids).set(1)
        for (api, shape), verdict in c.table.verdicts.items():
            metrics.shape_ids.labels(c.name, api, shape).set(1 if verdict.ids else 0)


async def recheck(up: Upstream) -> UpstreamCheck | None:
    """Re-read ``up``'s version; on a change, text until the check has run again."""
    try:
        version, frontend = await asyncio.wait_for(up.read_version(), CHECK_BUDGET_S / 6)
    except TimeoutError:
        log.warning("upstream %s: GET /version gave no answer in time", up.name)
        return None
    if (version, frontend) == (up.version, up.frontend):
        return None
    log.warning(
        "upstream %s: version %s -> %s; text until re-checked", up.name, up.version, version
    )
    up.shapes = _text_table("version changed: being re-checked")
    await up.adopt_version(version, frontend)
    found = await check_upstream(up)
    log.info("%s", summary_line(found))
    return found


async def watch_versions(
    upstreams: list[Upstream],
    metrics: GatewayMetrics,
    checks: dict[str, UpstreamCheck],
    every_s: float,
) -> None:
    """Every ``every_s``, re-read each ids upstream's version and re-check it on a change."""
    while True:
        await asyncio.sleep(every_s)
        for up in upstreams:
            if up.settings.mode != "ids":
                continue
            found = await recheck(up)
            if found is not None:
                checks[up.name] = found
                publish(metrics, list(checks.values()))


class StartupChecks:
    """The check of every ids upstream at start-up, published in ``/metrics``, then re-run
    on a version change every ``every_s`` (0: never) until :meth:`stop`; what the gateway's
    state is handed as its prover (``state.Gateway``), which cannot import this layer.

    >>> asyncio.run(StartupChecks(0).start([], GatewayMetrics())) is None
    True
    """

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.checks: dict[str, UpstreamCheck] = {}  # each ids upstream's conformance check
        self._watch: asyncio.Task[None] | None = None  # re-reads /version (watch_versions)

    async def start(self, upstreams: list[Upstream], metrics: GatewayMetrics) -> None:
        for up in upstreams:
            if up.settings.mode == "ids":
                self.checks[up.name] = found = await check_upstream(up)
                log.info("%s", summary_line(found))
        publish(metrics, list(self.checks.values()))
        if self.every_s > 0 and self.checks:
            self._watch = asyncio.create_task(
                watch_versions(upstreams, metrics, self.checks, self.every_s)
            )

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
