"""Reports people read at a glance: the verdict and breakdown in the terminal, one HTML page.

Owns: reading result directories leniently (``inputs``) and as runs, shards merged
(``results``); the parts of TTFT, series and buckets (``parts``); timelines (``timeline``);
the written verdict (``verdict``); plots (``figures``, plotly); the self-contained page
(``html``); rich output (``terminal``). Reads summaries and records; never imports the
capabilities that wrote them (``probe``, ``bench``, ``gateway``). May import ``records``,
``stats``, ``errors``.
"""
