"""Repeatable single-variable TTFT experiments against one server, one request at a time.

One request at a time is what makes the server's histogram deltas between two scrapes belong
to exactly that request. Each context size gets its own deterministic synthetic agent context
(salted per run so the first request is really cold), then every repeat appends a fresh
~1.4K-character turn to the same conversation, so the prefix cache is warm exactly as it is
for a coding agent. ``ab="ids"`` sends the same prompts as text and as token ids to
``/v1/completions``, alternating: the TTFT difference is what server-side tokenization costs.
``non_ascii`` also sends the chat series' text in non-ASCII letters (the same context and
turns, character for character, full-width) at the largest size: the k-th request of each is
a pair whose front ends tell what the server's non-ASCII tokenization path costs.
How one request is sent and measured is ``probe.send``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from ttftscope.agenttext import agent_turn, build_context_async, non_ascii
from ttftscope.client.endpoint import Endpoint
from ttftscope.probe.limits import check_sizes
from ttftscope.probe.send import ProbeRequest, RequestSender
from ttftscope.records import Phase, RecordWriter, RequestRecord, Variant
from ttftscope.tokenization.loader import Tokenizer
from ttftscope.tracing.context import TraceContext
from ttftscope.tracing.emit import SpanEmitter
from ttftscope.tracing.names import CLIENT_SERVICE
from ttftscope.tracing.receiver import receiving
from ttftscope.tracing.spans import client_span
from ttftscope.tracing.store import SpanStore

_ASSISTANT_REPLY = "Understood. Continuing."
# ids: each prompt also as text and as token ids to /v1/completions, alternating
AbMode = Literal["ids"]


@dataclass
class ProbeOptions:
    """What to send. Defaults follow ``vllm bench serve`` where names overlap.

    >>> ProbeOptions(context_tokens=[0, 8000], ab="ids").repeat
    5
    """

    context_tokens: Sequence[int] = (0,)
    repeat: int = 5
    num_warmups: int = 1
    max_tokens: int | None = None  # None: the endpoint's model.max_tokens
    ab: AbMode | None = None
    seed: int = 0
    turn_chars: int = 1400
    salt: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    metrics_settle_s: float = 3.0
    gateway_url: str | None = None  # also: chat direct vs through this gateway
    trace_port: int | None = None  # receive vLLM's spans here (127.0.0.1) for the run
    span_wait_s: float = 3.0  # how long a response waits for its span (vLLM batches them)
    budget_s: float | None = None  # no new request once the probe has run this long
    # time client-side tokenization with the local tokenizer before each chat request (the
    # doctor's own probe does not: that work would be ttftscope's, not the user's client's)
    client_tokenize: bool = True
    # also the chat series at the largest size in non-ASCII letters (variant non_ascii)
    non_ascii: bool = False

    @property
    def total_requests(self) -> int:
        """How many requests the whole probe sends (for progress displays).

        >>> ProbeOptions(context_tokens=[0, 8000], repeat=3, num_warmups=1, ab="ids").total_requests
        30
        >>> ProbeOptions(context_tokens=[0, 8000], repeat=3, non_ascii=True).total_requests
        15
        """
        per_series = 1 + self.num_warmups + self.repeat
        series = 1 + 2 * (self.ab == "ids") + 2 * (self.gateway_url is not None)
        wide = per_series if self.non_ascii and self.context_tokens else 0
        return len(self.context_tokens) * per_series * series + wide


@dataclass
class ProbeRun:
    """Every record of one probe run, in the order the requests were sent.

    >>> ProbeRun(run_id="r1", model="m").records
    []
    """

    run_id: str
    model: str
    records: list[RequestRecord] = field(default_factory=list)


class Prober:
    """Runs the experiments (which requests, in which order); :class:`RequestSender` measures
    each one and hands its checked :class:`RequestRecord` back to be kept and written."""

    def __init__(
        self,
        ep: Endpoint,
        opts: ProbeOptions,
        *,
        client: httpx.AsyncClient,
        writer: RecordWriter | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        local_tokenizer: Tokenizer | None = None,
        on_stage: Callable[[str], None] | None = None,
        emitter: SpanEmitter | None = None,
        spans: SpanStore | None = None,
    ) -> None:
        self.ep, self.opts, self.client = ep, opts, client
        self.emitter = emitter
        self.spans = spans
        self.writer, self.on_record = writer, on_record
        self.on_stage = on_stage
        self.tok = local_tokenizer
        self.run = ProbeRun(run_id=uuid.uuid4().hex[:12], model=ep.model)
        self.started = time.monotonic()
        self.stopped = False  # the time budget ran out before every request was sent
        self.sender = RequestSender(
            ep,
            client,
            run_id=self.run.run_id,
            settle_s=opts.metrics_settle_s,
            spans=spans,
            span_wait_s=opts.span_wait_s,
            sink=self._emit,
        )

    async def count_tokens(self, text: str) -> int:
        """Token count by the local tokenizer when configured, else the server's /tokenize."""
        if self.tok is not None:
            return len(self.tok.encode(text))
        return len(await self.ep.tokenize(self.client, text))

    async def _context(self, size: int, wide: bool = False) -> str:
        """The size's context; ``wide``: in non-ASCII letters, counted as sent."""
        if size <= 0:
            return ""
        header = f"# session {self.opts.salt}\n"  # salted: the first request is really cold
        form = non_ascii if wide else str

        async def count(text: str) -> int:
            return await self.count_tokens(form(header + text))

        return form(header + await build_context_async(size, self.opts.seed + size, count))

    def over_budget(self) -> bool:
        """Whether the time budget is spent (then no new request is sent; said once)."""
        budget = self.opts.budget_s
        if budget is None or time.monotonic() - self.started < budget:
            return False
        if not self.stopped:
            self._stage(f"time budget of {budget:g} s reached: the remaining requests are skipped")
        self.stopped = True
        return True

    def _stage(self, text: str) -> None:
        if self.on_stage is not None:
            self.on_stage(text)

    def _emit(self, rec: RequestRecord, span_ctx: TraceContext | None = None) -> None:
        # on_record first: it may drop fields the settings say not to record
        if self.on_record is not None:
            self.on_record(rec)
        self.run.records.append(rec)
        if self.writer is not None:
            self.writer.write(rec)
        if self.emitter is not None and span_ctx is not None:
            self.emitter.emit(CLIENT_SERVICE, [client_span(rec, span_ctx)])

    # -- experiments -------------------------------------------------------------------
    def _phase(self, i: int) -> Phase:
        if i == 0:
            return "cold"
        return "warmup" if i <= self.opts.num_warmups else "warm"

    async def chat_series(self, size: int, wide: bool = False) -> None:
        """Cold request, warmups, then ``repeat`` warm requests, each adding a fresh turn;
        ``wide``: the same text in non-ASCII letters (variant ``non_ascii``)."""
        if size > 0:
            self._stage(f"building the {size:,}-token context")
        ctx = await self._context(size, wide)
        form = non_ascii if wide else str
        self._stage(f"context {size:,} tokens: {'non-ASCII ' * wide}chat requests")
        history: list[dict[str, str]] = []
        total = 1 + self.opts.num_warmups + self.opts.repeat
        for i in range(total):
            if self.over_budget():
                return
            phase = self._phase(i)
            turn = form(agent_turn(i, seed=self.opts.seed, chars=self.opts.turn_chars))
            messages = _messages(ctx, history, turn)
            req = self._chat_request(messages)
            if wide:  # the pair's front ends compare the server's paths, not the client's
                req = ProbeRequest("non_ascii", req.path, req.body)
            await self.sender.send(req, phase, size)
            history += [
                {"role": "user", "content": turn},
                {"role": "assistant", "content": _ASSISTANT_REPLY},
            ]

    def _chat_request(self, messages: list[dict[str, str]]) -> ProbeRequest:
        body = {"model": self.ep.model, "messages": messages, **self._sampling()}
        tok = self.tok
        tokenize = None
        if tok is not None and self.opts.client_tokenize:

            def tokenize() -> int:
                return sum(len(tok.encode(m["content"])) for m in messages)

        return ProbeRequest("chat", "/chat/completions", body, tokenize)

    async def ab_series(self, size: int) -> None:
        """Text vs token ids on /v1/completions, alternating which goes first."""
        ctx = await self._context(size)
        self._stage(f"context {size:,} tokens: text vs ids on /v1/completions")
        total = 1 + self.opts.num_warmups + self.opts.repeat
        for i in range(total):
            if self.over_budget():
                return
            phase = self._phase(i)
            # each request gets its own fresh turn, so both variants find the same cached
            # context and the same uncached tail; only the prompt's form differs
            first, second = (
                ctx + agent_turn(1000 + 2 * i + k, seed=self.opts.seed, chars=self.opts.turn_chars)
                for k in (0, 1)
            )
            ids = await self.ep.tokenize(self.client, second if i % 2 == 0 else first)
            text_req = self._completion_request("text", first if i % 2 == 0 else second)
            ids_req = self._completion_request("ids", ids)
            pair = (text_req, ids_req) if i % 2 == 0 else (ids_req, text_req)
            await self.sender.send(pair[0], phase, size)
            # the first request of the first pair warmed the context for the second
            await self.sender.send(pair[1], "warmup" if phase == "cold" else phase, size)

    def _sampling(self) -> dict[str, Any]:
        return {
            "max_tokens": self.opts.max_tokens or self.ep.max_tokens,
            "temperature": self.ep.temperature,
        }

    def _completion_request(self, variant: Variant, prompt: str | list[int]) -> ProbeRequest:
        body = {"model": self.ep.model, "prompt": prompt, **self._sampling()}
        return ProbeRequest(variant, "/completions", body)

    async def gateway_series(self, size: int, gateway_url: str) -> None:
        """Chat straight to the server vs through the gateway, alternating, one conversation.

        Both variants extend the same conversation with a fresh turn per request, so both
        find the same warm prefix; the gateway also finds its session and encodes the tail.
        """
        ctx = await self._context(size)
        self._stage(f"context {size:,} tokens: direct vs gateway chat")
        history: list[dict[str, str]] = []
        for i in range(2 * (1 + self.opts.num_warmups + self.opts.repeat)):
            if self.over_budget():
                return
            phase = self._phase(i // 2) if i > 1 else ("cold" if i == 0 else "warmup")
            turn = agent_turn(2000 + i, seed=self.opts.seed, chars=self.opts.turn_chars)
            req = self._chat_request(_messages(ctx, history, turn))
            gateway = (i % 2 == 0) == (i // 2 % 2 == 0)  # alternate who goes first per pair
            req = ProbeRequest(
                "gateway" if gateway else "direct",
                req.path,
                req.body,
                base_url=gateway_url if gateway else None,
            )
            await self.sender.send(req, phase, size)
            history += [
                {"role": "user", "content": turn},
                {"role": "assistant", "content": _ASSISTANT_REPLY},
            ]

    async def run_all(self) -> ProbeRun:
        for size in self.opts.context_tokens:
            await self.chat_series(size)
            if self.opts.ab == "ids":
                await self.ab_series(size)
            if self.opts.gateway_url is not None:
                await self.gateway_series(size, self.opts.gateway_url)
            if self.opts.non_ascii and size == max(self.opts.context_tokens):
                await self.chat_series(size, wide=True)
        return self.run


def _messages(ctx: str, history: list[dict[str, str]], turn: str) -> list[dict[str, str]]:
    system = "You are a coding agent. Work carefully.\n" + ctx
    return [{"role": "system", "content": system}, *history, {"role": "user", "content": turn}]


async def run_probe(
    ep: Endpoint,
    opts: ProbeOptions,
    *,
    writer: RecordWriter | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    local_tokenizer: Tokenizer | None = None,
    on_stage: Callable[[str], None] | None = None,
    emitter: SpanEmitter | None = None,
) -> ProbeRun:
    """Run the whole probe and return every record (also streamed to ``writer``).

    Every request carries ``traceparent`` and ``X-Request-Id`` (its record's ``trace_id``);
    with an ``emitter`` (:func:`~ttftscope.tracing.emit.open_emitter`) each also becomes a
    client span.

    >>> import asyncio
    >>> from ttftscope import Endpoint, ProbeOptions, run_probe, summarize_probe
    >>> ep = Endpoint(base_url=server_url, metrics_url=metrics_url, model="tiny-llama")
    >>> opts = ProbeOptions(repeat=2, num_warmups=1, metrics_settle_s=0)
    >>> run = asyncio.run(run_probe(ep, opts))
    >>> [(r.phase, r.ok) for r in run.records]
    [('cold', True), ('warmup', True), ('warm', True), ('warm', True)]
    >>> summarize_probe(run.records, model=ep.model, base_url=ep.base_url)["completed"]
    4
    """
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    check_sizes(opts)
    async with httpx.AsyncClient(limits=limits, timeout=ep.timeout_s) as client:
        if not ep.model:
            ep.model = await ep.discover_model(client)
        if max(opts.context_tokens, default=0) > 0:
            check_sizes(opts, await ep.max_model_len(client), ep.model)
        with receiving(opts.trace_port) as spans:
            prober = Prober(
                ep,
                opts,
                client=client,
                writer=writer,
                on_record=on_record,
                local_tokenizer=local_tokenizer,
                on_stage=on_stage,
                emitter=emitter,
                spans=spans,
            )
            prober.run.model = ep.model
            return await prober.run_all()
