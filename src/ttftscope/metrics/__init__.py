"""Server metrics: scrape Prometheus ``/metrics``, diff two scrapes, map engine names.

Owns: the guarded exposition reader (``exposition``: size caps, line numbers, value range
around prometheus_client's parser), snapshots and deltas (``prom``), histogram buckets and
quantiles (``histogram``), the HTTP scrape (``scrape``), the vLLM V1/V0 and SGLang metric names
(``names``) and the neutral :class:`~ttftscope.metrics.engines.ServerBreakdown` built from them
(``engines``). Whatever a server sends ends in a result or a
:class:`~ttftscope.errors.MetricsError`. May import ``errors`` only. The public names are
re-exported by :mod:`ttftscope`.
"""
