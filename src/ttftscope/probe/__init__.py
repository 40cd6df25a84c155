"""Single-variable TTFT experiments, one request at a time, each TTFT split into parts.

Owns: the synthetic agent workload (``workload``), the experiments (``experiments``), the
decomposition and its checks (``decompose``) and summaries (``summary``). May import
``client``, ``metrics``, ``tokenization``, ``records``, ``config``, ``errors``, ``stats``;
never another capability (``localserver``, ``report``, ``cli``).
"""
