"""Plan a bench's workload: what each session sends, before anything is sent.

The public agent traces' figures the default workload follows (``traces``), the seeded
plan of sessions, turns and shards (``workload``), a session's text and the request of each
turn (``conversations``), each API's request body (``bodies``: chat, Anthropic Messages,
OpenAI Responses), replay of recorded requests (``replay``) and which API a recorded body
speaks (``replayapi``), and the preparation that fits it all to the server (``preparation``).
"""
