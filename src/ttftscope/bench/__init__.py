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

May import ``client``, ``metrics``, ``tokenization``, ``records``, ``config``, ``errors``,
``stats``, and of the probe exactly its workload text (``probe.workload``) and its record
builder (``probe.decompose``), so both commands send the same agent text and write the same
records; never ``localserver``, ``report``, ``gateway`` or ``cli``.
"""
