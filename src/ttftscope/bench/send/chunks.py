"""Which network chunks of a stream carry content, and the gaps between them (ITL).

:mod:`.transport` stamps each chunk that carries content as it arrives
(``perf_counter_ns``) in the loop that reads that request's stream, so concurrent
requests never see each other's stamps.

A chunk "carries content" when it holds what that API's first-content event holds (as
:mod:`ttftscope.client.events` and :mod:`ttftscope.client.agentevents` judge it): chat a
non-empty ``content``, ``text`` or ``reasoning_content`` string (the role-only first chunk,
the usage chunk and ``[DONE]`` do not count); Anthropic Messages a non-empty ``text``,
``partial_json`` or ``thinking`` (only deltas carry them non-empty); Responses a non-empty
``delta`` string (the ``*.done`` events and ``response.completed`` repeat the whole text
under ``text``, and do not count). Chunks that hold several events count once (as in
``vllm bench serve``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

from ttftscope.client.apis import Api

_CONTENT: Mapping[Api, re.Pattern[bytes]] = {
    "chat": re.compile(rb'"(?:content|text|reasoning_content|reasoning)"\s*:\s*"(?!")'),
    "messages": re.compile(rb'"(?:text|partial_json|thinking)"\s*:\s*"(?!")'),
    "responses": re.compile(rb'"delta"\s*:\s*"(?!")'),
}


def carries_content(chunk: bytes, api: Api = "chat") -> bool:
    """Whether a network chunk of an ``api`` SSE stream holds generated content.

    >>> carries_content(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\\n\\n')
    True
    >>> carries_content(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}')
    False
    >>> carries_content(b'data: {"type":"response.output_text.done","text":"Hi"}', "responses")
    False
    """
    return _CONTENT[api].search(chunk) is not None


def gaps_ms(stamps: list[int]) -> list[float]:
    """Milliseconds between consecutive content chunks.

    >>> gaps_ms([0, 2_000_000, 5_000_000])
    [2.0, 3.0]
    """
    return [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]
