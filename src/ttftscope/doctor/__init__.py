"""Doctor: evidence → findings (id, severity, evidence, remedy, saving); prefix-diff; instrument.

Reads records, result directories and request logs, scrapes ``/metrics`` and checks the
configuration; it never imports the capability that wrote what it reads (result
directories come through ``results``). May import results, decompose, client, metrics,
tokenization, records, config, assets, errors and stats.
"""
