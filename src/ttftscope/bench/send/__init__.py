"""Send a bench's requests and time them.

Poisson pacing and concurrency slots (``pacing``), the session workers of the measured
phase (``drive``), one request turned into a record (``request``) over the aiohttp
transport (``transport``), and which stream chunks carry content, with their gaps
(``chunks``).
"""
