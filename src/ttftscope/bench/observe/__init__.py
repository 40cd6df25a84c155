"""Observe the servers while a bench runs.

The ``/metrics`` sampler (``sampler``) and its light scrape of the few series it reads
(``lightscrape``), and the servers' per-part aggregates and queue over the run
(``servers``).
"""
