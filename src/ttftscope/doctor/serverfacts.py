"""What a server's ``/metrics`` says about itself, for the doctor: cache config, queue, models.

vLLM publishes its cache configuration as labels of ``vllm:cache_config_info`` (a gauge of
1): ``enable_prefix_caching`` and ``block_size`` are what the findings need. Its scheduler's
``max_num_seqs`` is not in ``/metrics`` (vLLM 0.32); ``/server_info`` has it, served only
with ``VLLM_SERVER_DEV_MODE=1`` (:func:`max_num_seqs`). The KV cache's size is a limit it does
publish there: ``kv_cache_size_tokens`` (else ``num_gpu_blocks`` blocks of ``block_size``) and
``kv_cache_max_concurrency`` (requests of ``max_model_len`` tokens that fit at once). The
gateway's own metrics (``ttftscope_``) carry its exactness checks and pass-throughs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ttftscope.metrics.names import Reader, detect_engine
from ttftscope.metrics.prom import SampleView

__all__ = ["GatewayFacts", "ServerFacts", "gateway_facts", "max_num_seqs", "server_facts"]

_CACHE_INFO = "vllm:cache_config_info"


@dataclass(frozen=True)
class ServerFacts:
    """One scrape of an engine's ``/metrics``, read for diagnosis.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> snap = parse_metrics('vllm:cache_config_info{block_size="128",'
    ...                      'enable_prefix_caching="False"} 1')
    >>> f = server_facts(snap, "http://h/metrics"); f.prefix_caching, f.block_size
    (False, 128)
    """

    source: str
    engine: str
    prefix_caching: bool | None = None
    block_size: int | None = None
    models: tuple[str, ...] = ()
    running: float | None = None
    waiting: float | None = None
    prefix_hits: float | None = None
    prefix_queries: float | None = None
    max_num_seqs: int | None = None  # from /server_info, when the server serves it
    kv_cache_tokens: int | None = None
    kv_max_concurrency: float | None = None  # requests of max_model_len tokens at once

    def limits(self) -> str:
        """What the server says of its own limits; ``--max-num-seqs`` unseen is said so.

        >>> ServerFacts(source="u", engine="vllm-v1", kv_cache_tokens=16384).limits()
        'KV cache 16,384 tokens (vllm:cache_config_info); --max-num-seqs not exported'
        """
        said = []
        if self.kv_cache_tokens is not None:
            room = self.kv_max_concurrency
            fits = "" if room is None else f", {room:.1f} requests of its max_model_len at once"
            said.append(f"KV cache {self.kv_cache_tokens:,} tokens{fits} (vllm:cache_config_info)")
        seqs = self.max_num_seqs
        said.append(
            "--max-num-seqs not exported"
            if seqs is None
            else f"--max-num-seqs {seqs} (/server_info)"
        )
        return "; ".join(said)


def max_num_seqs(server_info: object) -> int | None:
    """``vllm_config.scheduler_config.max_num_seqs`` of vLLM's ``/server_info`` (JSON format).

    >>> max_num_seqs({"vllm_config": {"scheduler_config": {"max_num_seqs": 256}}})
    256
    >>> max_num_seqs({"vllm_config": "VllmConfig(...)"}) is None  # the text format
    True
    """
    node = server_info
    for key in ("vllm_config", "scheduler_config", "max_num_seqs"):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, int) and not isinstance(node, bool) and node > 0 else None


def _label(view: SampleView, name: str, label: str) -> str | None:
    for labels in view.series(name):
        value = dict(labels).get(label)
        if value is not None:
            return value
    return None


def _truth(text: str | None) -> bool | None:
    if text is None:
        return None
    return {"true": True, "false": False}.get(text.strip().lower())


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _kv_tokens(view: SampleView, block_size: int | None) -> int | None:
    """The KV cache's size in tokens, as the server states it."""
    stated = _int(_label(view, _CACHE_INFO, "kv_cache_size_tokens"))
    blocks = _int(_label(view, _CACHE_INFO, "num_gpu_blocks"))
    if stated is None and blocks is not None and block_size is not None:
        return blocks * block_size
    return stated


def server_facts(view: SampleView, source: str) -> ServerFacts:
    """Read the doctor's facts from one scrape (``source`` names where it came from).

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> snap = parse_metrics('vllm:cache_config_info{block_size="16",num_gpu_blocks="100",'
    ...                      'kv_cache_max_concurrency="2.5"} 1')
    >>> f = server_facts(snap, "u")
    >>> f.kv_cache_tokens, f.kv_max_concurrency
    (1600, 2.5)
    """
    engine = detect_engine(view)
    reader = Reader(view, engine, {})
    block_size = _int(_label(view, _CACHE_INFO, "block_size"))
    return ServerFacts(
        source=source,
        engine=engine,
        prefix_caching=_truth(_label(view, _CACHE_INFO, "enable_prefix_caching")),
        block_size=block_size,
        models=tuple(view.label_values("model_name")),
        running=reader.gauge("running"),
        waiting=reader.gauge("waiting"),
        prefix_hits=reader.counter("prefix_hits"),
        prefix_queries=reader.counter("prefix_queries"),
        kv_cache_tokens=_kv_tokens(view, block_size),
        kv_max_concurrency=_float(_label(view, _CACHE_INFO, "kv_cache_max_concurrency")),
    )


@dataclass(frozen=True)
class GatewayFacts:
    """The gateway's exactness counters and pass-throughs, from its ``/metrics``.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> g = gateway_facts(parse_metrics("ttftscope_shadow_checks_total 10\\n"
    ...                         "ttftscope_shadow_mismatches_total 1\\n"), "gw")
    >>> g.shadow_checks, g.shadow_mismatches
    (10.0, 1.0)
    """

    source: str
    shadow_checks: float = 0.0
    shadow_mismatches: float = 0.0
    verify_checks: float = 0.0
    verify_mismatches: float = 0.0
    passthrough: dict[str, float] = field(default_factory=dict)  # by reason

    @property
    def mismatches(self) -> float:
        """Shadow and upstream-verification mismatches together."""
        return self.shadow_mismatches + self.verify_mismatches


def _total(view: SampleView, name: str) -> float:
    return sum(view.series(name).values())


def gateway_facts(view: SampleView, source: str) -> GatewayFacts:
    """Read the gateway's counters from one scrape of its ``/metrics``."""
    by_reason: dict[str, float] = {}
    for labels, value in view.series("ttftscope_passthrough_total").items():
        reason = dict(labels).get("reason", "?")
        by_reason[reason] = by_reason.get(reason, 0.0) + value
    return GatewayFacts(
        source=source,
        shadow_checks=_total(view, "ttftscope_shadow_checks_total"),
        shadow_mismatches=_total(view, "ttftscope_shadow_mismatches_total"),
        verify_checks=_total(view, "ttftscope_verify_checks_total"),
        verify_mismatches=_total(view, "ttftscope_verify_mismatches_total"),
        passthrough=by_reason,
    )
