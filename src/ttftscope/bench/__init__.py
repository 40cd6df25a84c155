"""Agent-session load tests: many concurrent coding-agent sessions, TTFT percentiles, queues.

A run (``runner``) does four things, one subpackage each, with what it is asked to do and
where it sends beside them (``options``: the run's options and the parsers of its flags;
``targets``: each target's URLs and the credentials it may get):

- ``plan``: plan the workload: the traces' figures, the seeded sessions and shards, their
  text and each API's request body, or recorded requests replayed; fitted to the server;
- ``send``: send and time: pacing and concurrency slots, the session workers, one request
  over the aiohttp transport, per-chunk stream times;
- ``observe``: observe the servers: the ``/metrics`` sampler, its light scrape, the
  servers' per-part aggregates and queue;
- ``output``: write results: JSONL files written off the event loop, live statistics, the
  summary and its terminal table.

May import ``decompose`` (the record builder the probe uses too), ``results`` (the summary
schema reports read), ``client``, ``metrics``, ``tokenization``, ``records``, ``config``,
``agenttext`` (the agent text the probe sends too), ``errors``, ``stats``; never another
capability (``probe``, ``localserver``, ``report``, ``gateway``) or ``cli``.
"""
