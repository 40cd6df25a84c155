"""Where the gateway's work runs: the bounded thread pool (``workpool``), the worker
processes for long re-encodes (``coldpool``), malloc arenas (``heap``) and what a running
gateway changes in its process, given back when it stops (``hosttuning``)."""
