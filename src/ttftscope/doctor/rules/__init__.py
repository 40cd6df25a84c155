"""The doctor's rules, one module per kind of evidence; ``doctor.diagnose`` runs them all.

``tokenize``: the front end (or client tokenization) growing with context, still dominating
through the gateway, a bench's run-wide histograms; ``server``: queueing, 429s, a shared
server, the prefix cache off, cold or missed while prefill dominates; ``path``: outside the
server dominating; ``config``: configuration not applied; ``text``: dynamic prefixes,
inexact ids, non-ASCII/NFC slow paths. A new rule goes in the module of its evidence, its
id in ``ttftscope.findings.FindingId``, its test in ``tests/doctor/rules/``.
"""
