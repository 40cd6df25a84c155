"""Agent-session load tests: many concurrent coding-agent sessions, TTFT percentiles, queues.

Owns: what a run is asked to do and the parsers of its flags (``options``), the targets it
sends to (``targets``), the public agent traces' figures the default workload follows
(``traces``), the seeded session workload and its shards (``workload``), session text
(``sessions``) and each API's request body (``bodies``: chat, Anthropic Messages, OpenAI
Responses), replay of recorded requests (``replay``) and which API a recorded body speaks
(``replayapi``), arrival pacing and concurrency (``pacing``), per-chunk
stream timing (``chunks``), one request turned into a record (``request``), the
``/metrics`` sampler and its light scrape (``sampler``, ``scrape``), JSONL files written off
the event loop (``sink``), live statistics (``live``), the run (``runner``), the summary
(``summary``) and its terminal table (``table``).

May import ``decompose`` (the record builder the probe uses too), ``results`` (the summary
schema reports read), ``client``, ``metrics``, ``tokenization``, ``records``, ``config``,
``agenttext`` (the agent text the probe sends too), ``errors``, ``stats``; never another
capability (``probe``, ``localserver``, ``report``, ``gateway``) or ``cli``.
"""
