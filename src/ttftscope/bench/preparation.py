"""Before a bench sends anything measured: the model, the workload and its fit, the contexts.

Sizes are checked against the server's ``max_model_len`` before any context is built (a
100K-token context costs seconds to build and a minute to prefill on a CPU). Contexts are
counted in tokens by the local tokenizer when one is configured, else by the server's
``/tokenize``, as the probe does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from ttftscope.bench.options import BenchOptions
from ttftscope.bench.replay import read_replay, replay_sessions
from ttftscope.bench.sessions import (
    BodyDefaults,
    ContextRecipe,
    Conversation,
    TokenCounter,
    build_sessions,
)
from ttftscope.bench.targets import Target
from ttftscope.bench.workload import (
    SessionPlan,
    plan_workload,
    session_tokens,
    shard_plan,
    shared_prefix_tokens,
)
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


def check_fits(
    plans: Sequence[SessionPlan], max_model_len: int | None, max_tokens: int, model: str
) -> None:
    """Refuse a workload whose longest session would not fit the model's context.

    >>> from ttftscope.bench.workload import SessionPlan
    >>> check_fits([SessionPlan(0, 200_000, ())], 131072, 16, "m")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ttftscope.errors.ConfigError: session 0 would grow to ~200,016 tokens, above m's ...
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
    """Resolve the model, plan (or read) the workload, check it fits, build this shard's.

    >>> opts = BenchOptions(scale=0.05)
    >>> prep = await prepare(ep, opts, targets, client, None, print)  # doctest: +SKIP
    >>> len(prep.conversations), prep.run_id  # doctest: +SKIP
    (8, 'bench-33cdd35437')
    """
    if not ep.model:
        ep.model = await ep.discover_model(client)
    max_tokens = opts.max_tokens or ep.max_tokens
    defaults = BodyDefaults(
        ep.model, max_tokens, ep.temperature, opts.max_tokens is not None, opts.extra_body
    )
    conversations: list[Conversation]
    if opts.replay is not None:
        log = read_replay(opts.replay, opts.num_prompts)
        key, total = opts.workload_key(log.digest), log.requests
        mine = replay_sessions(log, opts, len(targets))
        conversations = [s for s in mine if opts.shard.includes(s.plan.session)]
    else:
        plans = plan_workload(opts, len(targets))
        key, total = opts.workload_key(), sum(len(p.turns) for p in plans)
        check_fits(plans, await ep.max_model_len(client), max_tokens, ep.model)
        shared = shared_prefix_tokens(plans) if opts.shared_system_prompt else None
        recipe = ContextRecipe(opts.seed, key, shared)
        counter = _counter(ep, client, count_tokens)
        conversations = list(
            await build_sessions(shard_plan(plans, opts.shard), recipe, counter, on_stage)
        )
    run_id = opts.run_id or f"bench-{key}"
    return Prepared(run_id, key, total, ep.model, defaults, conversations)
