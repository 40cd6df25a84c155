"""Where the instrument worker's extra facts come from: ``/metrics`` windows, client tokens.

:class:`MetricsWindows` keeps the last scrape as the baseline of the next call's window and
scrapes again once a call has ended, until the server's histograms show it (at most
``settle_s``). :class:`ClientTokens` renders and encodes a call's prompt as the server would,
timed. Neither raises for a broken source: a metrics URL that fails is retried only every
``_RETRY_S`` seconds, a tokenizer that cannot load is given up on, each said once at warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from ttftscope.errors import MetricsError, TtftscopeError
from ttftscope.metrics.engines import ServerBreakdown, server_breakdown
from ttftscope.metrics.prom import MetricsSnapshot, metrics_delta
from ttftscope.metrics.scrape import scrape_metrics
from ttftscope.sdkinstrument.calls import Call
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

log = logging.getLogger("ttftscope.instrument")

_RETRY_S = 30.0
_POLL_S = 0.02


class MetricsWindows:
    """Scrapes and the last snapshot (the baseline of the next call's window)."""

    def __init__(
        self,
        url: str | None,
        headers: Mapping[str, str],
        *,
        timeout_s: float = 2.0,
        settle_s: float = 2.0,
    ) -> None:
        self.url, self.headers = url, headers
        self.timeout_s, self.settle_s = timeout_s, settle_s
        self.http = httpx.Client(timeout=timeout_s)
        self.baseline: MetricsSnapshot | None = None
        self.failed_at: float | None = None
        self.error = ""

    def take(self) -> MetricsSnapshot | None:
        url = self.url
        if url is None:
            return None
        if self.failed_at is not None and time.monotonic() - self.failed_at < _RETRY_S:
            return None
        try:
            snap = scrape_metrics(
                url,
                client=self.http,
                timeout=self.timeout_s,
                headers=self.headers,
            )
        except MetricsError as exc:
            if self.failed_at is None:
                log.warning(
                    "ttftscope.instrument: no server metrics (%s); queue and prefill stay "
                    "empty, retrying every %.0f s",
                    exc.message,
                    _RETRY_S,
                )
            self.failed_at, self.error = time.monotonic(), exc.message
            return None
        self.failed_at = None
        return snap

    def window(self, call: Call, model: str | None) -> tuple[ServerBreakdown, int] | str:
        """The window ending after ``call`` and when its last scrape was sent, or why none."""
        before = self.baseline
        settle = call.error is None and not call.overlapped and before is not None
        deadline = time.monotonic() + (self.settle_s if settle else 0.0)
        while True:
            sent = time.monotonic_ns()
            after = self.take()
            if after is None:
                self.baseline = None
                return f"no server metrics: {self.error or 'scrape failed'}"
            if before is None or not settle:
                self.baseline = after
                return "no server metrics from before this call" if before is None else ""
            bd = server_breakdown(metrics_delta(before, after), model=model)
            done = all(c is None or c >= 1 for c in (bd.ttft_count, bd.e2e_count))
            if done or time.monotonic() > deadline:
                self.baseline = after
                return bd, sent
            time.sleep(_POLL_S)


class ClientTokens:
    """Client tokenization, timed: the prompt rendered and encoded as the server would."""

    def __init__(self, source: Tokenizer | str | Path | None) -> None:
        self.source = source
        self.tok: Tokenizer | None = source if isinstance(source, Tokenizer) else None
        self.renderer: ChatRenderer | None = None
        self.broken = ""

    def _load(self) -> Tokenizer | None:
        if self.tok is None and not self.broken and self.source is not None:
            try:
                self.tok = load_tokenizer(str(self.source))
            except TtftscopeError as exc:
                self.broken = exc.message
                log.warning("ttftscope.instrument: no client tokenization (%s)", exc.message)
        return self.tok

    def measure(self, call: Call) -> tuple[float | None, int | None, str | None]:
        """``(tokenize_ms, tokens, note)`` for a call's prompt."""
        body = call.body or {}
        tok = self._load()
        if tok is None:
            return None, None, f"no client tokenizer: {self.broken}" if self.broken else None
        prompt = body.get("prompt")
        if call.endpoint == "completions" and call.variant == "ids":
            return None, _ids_count(prompt), None
        t0 = time.perf_counter_ns()
        try:
            if call.endpoint == "chat":
                text = self._render(tok, body)
            else:
                text = "".join(prompt) if isinstance(prompt, list) else str(prompt or "")
            count = len(tok.encode(text))
        except Exception as exc:  # a template or a message shape it cannot render
            return None, None, f"client tokenization failed: {type(exc).__name__}: {exc}"
        return (time.perf_counter_ns() - t0) / 1e6, count, None

    def _render(self, tok: Tokenizer, body: Mapping[str, Any]) -> str:
        if self.renderer is None:
            self.renderer = ChatRenderer(tok)
        messages = [plain(m) for m in body.get("messages") or ()]
        tools = [plain(t) for t in body.get("tools") or ()] or None
        return self.renderer.render(messages, tools=tools)


def plain(value: Any) -> Any:
    """A pydantic object (an SDK message, a tool) as plain data; anything else as it is."""
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else value


def _ids_count(prompt: Any) -> int | None:
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
        return sum(len(p) for p in prompt)
    return len(prompt) if isinstance(prompt, list) else None
