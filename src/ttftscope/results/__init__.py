"""Result directories read back: what probe, bench and instrument wrote, for anyone to judge.

Owns: lenient reading of the files of a result directory, the summaries' schemas and shard
positions (``files``, ``summaries``); result directories as runs, shards of one run merged
(``runs``); the parts of a TTFT per request and as medians, series and context-size buckets
(``parts``). Below the capabilities, so ``report`` and ``doctor`` read the same runs the
same way, and ``bench`` writes the summary schema they read. May import ``client``,
``records``, ``errors`` and ``stats``; never a capability or ``cli``.
"""
