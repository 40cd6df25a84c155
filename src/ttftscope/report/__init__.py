"""Reports people read at a glance: the breakdown and diagnosis in the terminal, one HTML page.

Owns: measured A/B comparisons (``compare``); timelines (``timeline``); plots (``figures``,
plotly); the self-contained page (``html``); rich output (``terminal``). Renders the
doctor's :class:`~ttftscope.findings.Diagnosis`, which the CLI has the doctor make: advice
is made in one place. Reads runs through ``results`` (result directories, shards merged,
TTFT parts); never imports the capabilities that wrote them (``probe``, ``bench``,
``gateway``) or the ``doctor``. May import ``results``, ``findings``, ``records``, ``stats``,
``errors``.
"""
