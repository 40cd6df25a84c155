"""The gateway's own Prometheus metrics (``ttftscope_`` prefix), one registry per app.

A registry per app (not prometheus-client's global one) lets tests and several gateways in
one process keep their counts apart.

>>> m = GatewayMetrics()
>>> m.requests.labels("chat", "local", "ids", "200").inc()
>>> b"ttftscope_gateway_requests_total" in m.exposition()
True
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Tokenizing an appended turn takes ~1 ms, a cold 100K-token prompt up to ~0.5 s.
_TOKENIZE_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class GatewayMetrics:
    """Every metric the gateway exports; label values are fixed sets (route, mode, reason)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        p = "ttftscope_gateway_"
        self.requests = Counter(
            p + "requests",
            "Requests by route, upstream, mode and HTTP status",
            ["route", "upstream", "mode", "status"],
            registry=r,
        )
        self.client_disconnects = Counter(
            p + "client_disconnects",
            "Clients that left after sending their request: before its answer began (counted "
            "in requests_total as 499) or during its stream; the upstream request, if any, "
            "was closed (vLLM aborts it)",
            ["phase"],
            registry=r,
        )
        self.tokenize_seconds = Histogram(
            p + "tokenize_seconds",
            "Render + incremental encode per request",
            ["upstream"],
            buckets=_TOKENIZE_BUCKETS,
            registry=r,
        )
        self.tokens_reused = Counter(
            p + "tokens_reused",
            "Prompt tokens taken from a cached session",
            ["upstream"],
            registry=r,
        )
        self.chars_encoded = Counter(
            p + "chars_encoded", "Prompt characters (re-)encoded", ["upstream"], registry=r
        )
        self.prompt_tokens = Counter(
            p + "prompt_tokens", "Prompt tokens sent as ids", ["upstream"], registry=r
        )
        self.cache_entries = Gauge(p + "session_cache_entries", "Cached sessions", registry=r)
        self.cache_bytes = Gauge(p + "session_cache_bytes", "Bytes held by sessions", registry=r)
        self.cache_evictions = Counter(
            p + "session_cache_evictions", "Sessions evicted", registry=r
        )
        self.cache_forks = Counter(p + "session_forks", "Sessions forked from another", registry=r)
        self.widenings = Counter(
            p + "encoder_widenings", "Verified re-encode widenings", registry=r
        )
        self.full_fallbacks = Counter(p + "encoder_full_fallbacks", "Full re-encodes", registry=r)
        self.shadow_checks = Counter(p + "shadow_checks", "Background exactness checks", registry=r)
        self.shadow_mismatches = Counter(
            p + "shadow_mismatches", "Background checks that found a difference", registry=r
        )
        self.verify_checks = Counter(
            p + "verify_checks",
            "Requests compared with the upstream's own rendering",
            ["upstream"],
            registry=r,
        )
        self.verify_mismatches = Counter(
            p + "verify_mismatches",
            "Requests whose ids differed from the upstream's",
            ["upstream"],
            registry=r,
        )
        self.passthrough = Counter(
            p + "passthrough",
            "Requests sent upstream as text, by reason",
            ["upstream", "reason"],
            registry=r,
        )
        self.upstream_ttfb = Histogram(
            p + "upstream_first_byte_seconds",
            "Upstream response headers after the request",
            ["upstream"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_ttft = Histogram(
            p + "upstream_first_token_seconds",
            "First upstream SSE event that carries a token (every API)",
            ["upstream"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_api = Gauge(
            p + "upstream_api",
            "How ids reach each upstream (1 = in use)",
            ["upstream", "api"],
            registry=r,
        )

        self.encode_jobs = Gauge(
            p + "encode_jobs", "Long encodes and renders running or waiting", registry=r
        )
        self.encode_processes = Gauge(
            p + "encode_processes",
            "Encode worker processes started and ready (their tokenizers loaded)",
            registry=r,
        )
        self.encode_process_failures = Counter(
            p + "encode_process_failures",
            "Encode jobs lost with a worker process that died (encoded on a thread instead)",
            registry=r,
        )
        self.encode_refused = Counter(
            p + "encode_refused",
            "Requests answered 503 because the encode queue was full",
            registry=r,
        )
        self.upstream_version = Gauge(
            p + "upstream_version",
            "The version each upstream reports, and whether the gateway sends it ids (ids="
            '"no": no shape class proven by its check, or not vLLM 0.32+: served as text)',
            ["upstream", "version", "ids"],
            registry=r,
        )
        self.shape_ids = Gauge(
            p + "shape_ids",
            "Whether requests of a shape class go to an upstream as ids (1) or text (0), as "
            "its conformance check found (gateway/proving/conformance.py)",
            ["upstream", "api", "shape"],
            registry=r,
        )

    def exposition(self) -> bytes:
        """The text exposition for ``GET /metrics``."""
        return generate_latest(self.registry)
