"""Doctor: evidence → findings (id, severity, evidence, remedy, saving); prefix-diff.

Owns: what it reads (``gather``, ``serverfacts``, the live queue: ``sampling``), the rules
(``rules/``), running them (``diagnose``), and prefix-diff (``prefix``, ``dynamic``,
``logged_bodies``). Reads records,
result directories and request logs, scrapes ``/metrics`` and checks the configuration; it
never imports the capability that wrote what it reads (result directories come through
``results``; SDK records are ``sdkinstrument``'s). May import results, decompose, findings,
client, metrics, tokenization, records, config, assets, errors and stats.
"""
