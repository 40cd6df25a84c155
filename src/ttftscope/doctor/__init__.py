"""Doctor: evidence → findings (id, severity, evidence, remedy, saving); prefix-diff; instrument.

Reads records, result directories and request logs, scrapes ``/metrics`` and checks the
configuration; it never imports the capability that wrote what it reads, except
``report.results`` (the lenient result-directory reader, declared in the layers contract).
May import client, metrics, tokenization, records, config, assets, errors and stats.
"""
