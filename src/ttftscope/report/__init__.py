"""Reports people read at a glance: the verdict and breakdown in the terminal, one HTML page.

Owns: timelines (``timeline``); the written verdict (``verdict``); plots (``figures``,
plotly); the self-contained page (``html``); rich output (``terminal``). Reads runs through
``results`` (result directories, shards merged, TTFT parts); never imports the capabilities
that wrote them (``probe``, ``bench``, ``gateway``). May import ``results``, ``records``,
``stats``, ``errors``.
"""
