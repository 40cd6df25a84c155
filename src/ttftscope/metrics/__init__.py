"""Server metrics: scrape Prometheus ``/metrics``, diff two scrapes, map engine names.

Owns: the exposition parser, snapshots, deltas and histogram quantiles (``prom``) and the
vLLM V1/V0 and SGLang metric names behind one :class:`~ttftscope.metrics.engines.
ServerBreakdown` (``engines``). May import ``errors`` only. The public names are re-exported
by :mod:`ttftscope`.
"""
