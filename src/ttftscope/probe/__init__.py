"""Single-variable TTFT experiments, one request at a time, each TTFT split into parts.

Owns: the experiments (``experiments``) and summaries (``summary``); the agent text it sends
(``ttftscope.agenttext``) and the per-request decomposition (``ttftscope.decompose``) sit
below the capabilities, shared with bench and instrument. May import ``decompose``,
``results``, ``client``, ``metrics``, ``tokenization``, ``records``, ``config``,
``agenttext``, ``errors``, ``stats``; never another capability (``localserver``, ``report``,
``cli``).
"""
