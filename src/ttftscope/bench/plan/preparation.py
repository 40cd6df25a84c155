"""Before a bench sends anything measured: the model, the API, the workload and its fit.

Sizes are checked against the server's ``max_model_len`` before any context is built (a
100K-token context costs seconds to build and a minute to prefill on a CPU); a workload
that would not fit is scaled down until it does, unless the sizes were the user's choice.
Contexts are counted in tokens by the local tokenizer when one is configured, else by the server's
``/tokenize``, as the probe does. The API is ``--api``'s, or a replay file's own (chat when
neither says). Answers are as long as the traces' median output (``--max-tokens``
otherwise); a replayed body keeps its own limit, or gets ``model.max_tokens``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from ttftscope.agenttext import TokenCounter
from ttftscope.bench.options import BenchOptions
from ttftscope.bench.plan.bodies import BodyDefaults
from ttftscope.bench.plan.conversations import (
    ContextRecipe,
    Conversation,
    build_sessions,
)
from ttftscope.bench.plan.replay import read_replay, replay_sessions
from ttftscope.bench.plan.traces import OUTPUT_MEDIAN_TOKENS
from ttftscope.bench.plan.workload import (
    SessionPlan,
    plan_workload,
    session_tokens,
    shard_plan,
    shared_prefix_tokens,
)
from ttftscope.bench.targets import Target
from ttftscope.client.apis import Api
from ttftscope.client.endpoint import Endpoint
from ttftscope.errors import ConfigError


@dataclass(frozen=True)
class Prepared:
    """A workload ready to send: identity, request defaults and this shard's sessions."""

    run_id: str
    workload_key: str
    workload_requests: int  # requests of the whole workload (every shard)
    model: str
    defaults: BodyDefaults
    conversations: Sequence[Conversation]
    scale: float = 1.0  # the workload's --scale: the options', or scaled down to fit
    notes: tuple[str, ...] = ()  # what preparing changed, one line each (said before the run)

    @property
    def api(self) -> Api:
        """The API every request of the run speaks."""
        return self.defaults.api


def check_fits(
    plans: Sequence[SessionPlan], max_model_len: int | None, max_tokens: int, model: str
) -> None:
    """Refuse a workload whose longest session would not fit the model's context.

    >>> from ttftscope.bench.plan.workload import SessionPlan
    >>> check_fits([SessionPlan(0, 200_000, ())], 131072, 16, "m")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ttftscope.ConfigError: session 0 would grow to ~200,016 tokens, above m's ...
    """
    if max_model_len is None or not plans:
        return
    longest = max(plans, key=session_tokens)
    need = session_tokens(longest) + max_tokens
    if need > max_model_len:
        raise ConfigError(
            f"session {longest.session} would grow to ~{need:,} tokens, above {model}'s "
            f"max_model_len of {max_model_len:,} (context {longest.context_tokens:,} plus "
            f"{len(longest.turns)} turns and the answer)",
            hint="use smaller --context-tokens or --scale, fewer --num-prompts or more --sessions",
        )


def fit_scale(
    opts: BenchOptions, n_targets: int, max_model_len: int, max_tokens: int
) -> float | None:
    """The largest scale, at most ``opts.scale`` and of two significant digits when below it,
    whose planned workload fits ``max_model_len`` (None: no scale makes it fit).

    >>> fit_scale(BenchOptions(), 1, 200_000, 216), fit_scale(BenchOptions(), 1, 131_072, 216)
    (1.0, 0.98)
    """
    scale = opts.scale
    for _ in range(_FIT_TRIES):
        need = _need(opts, scale, n_targets, max_tokens)
        if need <= max_model_len:
            return (
                scale
                if scale == opts.scale
                else _climb(opts, scale, n_targets, max_model_len, max_tokens)
            )
        scale = _two_digits_down(scale * min(max_model_len / need, _FIT_STEP))
        if scale <= 0:
            break
    return None


_FIT_TRIES = 200
_FIT_STEP = 0.98  # the parts that do not scale (a turn's template, its shortest text) shrink less


def _need(opts: BenchOptions, scale: float, n_targets: int, max_tokens: int) -> int:
    """The tokens the longest session of the workload at ``scale`` needs, answer included."""
    plans = plan_workload(dataclasses.replace(opts, scale=scale), n_targets)
    return max(map(session_tokens, plans), default=0) + max_tokens


def _climb(
    opts: BenchOptions, scale: float, n_targets: int, max_model_len: int, max_tokens: int
) -> float:
    """From a ``scale`` that fits, up by the second significant digit while it still fits."""
    while True:
        up = _two_digits_down(scale + 10.0 ** (math.floor(math.log10(scale)) - 1))
        if up >= opts.scale or _need(opts, up, n_targets, max_tokens) > max_model_len:
            return scale
        scale = up


def _two_digits_down(x: float) -> float:
    """``x`` rounded down to two significant digits.

    >>> _two_digits_down(0.987), _two_digits_down(0.05129), _two_digits_down(3.0)
    (0.98, 0.051, 3.0)
    """
    if x <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.floor(x / step + 1e-9) * step, 12)


def _fitted(
    opts: BenchOptions, n_targets: int, max_model_len: int | None, max_tokens: int
) -> tuple[BenchOptions, tuple[str, ...]]:
    """``opts`` scaled down to fit the server, with the line that says so (unchanged when it
    fits, when fitting is off or when nothing fits: :func:`check_fits` then refuses)."""
    if max_model_len is None or not opts.fit_scale:
        return opts, ()
    scale = fit_scale(opts, n_targets, max_model_len, max_tokens)
    if scale is None or scale == opts.scale:
        return opts, ()
    note = f"scaled to --scale {scale:g} to fit max_model_len {max_model_len:,}"
    return dataclasses.replace(opts, scale=scale), (note,)


def _counter(
    ep: Endpoint, client: httpx.AsyncClient, local: Callable[[str], int] | None
) -> TokenCounter:
    async def by_server(text: str) -> int:
        return len(await ep.tokenize(client, text))

    async def by_tokenizer(text: str) -> int:
        assert local is not None
        return local(text)

    return by_server if local is None else by_tokenizer


async def prepare(
    ep: Endpoint,
    opts: BenchOptions,
    targets: Sequence[Target],
    client: httpx.AsyncClient,
    count_tokens: Callable[[str], int] | None,
    on_stage: Callable[[str], None],
) -> Prepared:
    """Resolve the model, plan (or read) the workload, fit it, build this shard's.

    A synthetic workload too long for the server's ``max_model_len`` is scaled down to fit
    (``opts.fit_scale``; :attr:`Prepared.notes` says so), else refused.

    Inside a run (``client`` an ``httpx.AsyncClient``; no ``count_tokens``: the server's
    ``/tokenize`` counts)::

        prep = await prepare(ep, BenchOptions(scale=0.05), targets, client, None, print)
        len(prep.conversations), prep.run_id  # (8, 'bench-33cdd35437')
    """
    if not ep.model:
        ep.model = await ep.discover_model(client)
    notes: tuple[str, ...] = ()
    if opts.replay is not None:
        log = read_replay(opts.replay, opts.num_prompts, opts.api)
        defaults = _defaults(ep, opts, ep.max_tokens, log.api)
        key, total = opts.workload_key(log.digest), log.requests
        mine = replay_sessions(log, opts, len(targets))
        conversations: list[Conversation] = [s for s in mine if opts.shard.includes(s.plan.session)]
    else:
        defaults = _defaults(ep, opts, OUTPUT_MEDIAN_TOKENS, opts.api or "chat")
        limit = await ep.max_model_len(client)
        opts, notes = _fitted(opts, len(targets), limit, defaults.max_tokens)
        plans = plan_workload(opts, len(targets))
        key, total = opts.workload_key(), sum(len(p.turns) for p in plans)
        check_fits(plans, limit, defaults.max_tokens, ep.model)
        shared = shared_prefix_tokens(plans) if opts.shared_system_prompt else None
        recipe = ContextRecipe(opts.seed, key, shared)
        counter = _counter(ep, client, count_tokens)
        conversations = list(
            await build_sessions(shard_plan(plans, opts.shard), recipe, counter, on_stage)
        )
    run_id = opts.run_id or f"bench-{key}"
    return Prepared(run_id, key, total, ep.model, defaults, conversations, opts.scale, notes)


def _defaults(ep: Endpoint, opts: BenchOptions, max_tokens: int, api: Api) -> BodyDefaults:
    """Every body's model, limit (``--max-tokens`` over ``max_tokens``), sampling, API.

    >>> ep = Endpoint("http://h/v1", "http://h/metrics", model="m")
    >>> d = _defaults(ep, BenchOptions(max_tokens=8), 216, "messages")
    >>> d.max_tokens, d.force_max_tokens, d.api
    (8, True, 'messages')
    >>> _defaults(ep, BenchOptions(), 216, "chat").max_tokens
    216
    """
    forced = opts.max_tokens is not None
    limit = opts.max_tokens if opts.max_tokens is not None else max_tokens
    return BodyDefaults(ep.model or "", limit, ep.temperature, forced, opts.extra_body, api)
