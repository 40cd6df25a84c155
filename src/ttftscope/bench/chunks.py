"""Which network chunks of a stream carry content, and the gaps between them (ITL).

:mod:`.transport` stamps each chunk that carries content as it arrives
(``perf_counter_ns``) in the loop that reads that request's stream, so concurrent
requests never see each other's stamps.

A chunk "carries content" when it holds a non-empty ``content``, ``text`` or
``reasoning_content`` string: the role-only first chunk, the usage chunk and ``[DONE]``
do not count. Chunks that hold several events count once (as in ``vllm bench serve``).
"""

from __future__ import annotations

import itertools
import re

_CONTENT = re.compile(rb'"(?:content|text|reasoning_content|reasoning)"\s*:\s*"(?!")')


def carries_content(chunk: bytes) -> bool:
    """Whether a network chunk of an SSE stream holds generated text.

    >>> carries_content(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\\n\\n')
    True
    >>> carries_content(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}')
    False
    """
    return _CONTENT.search(chunk) is not None


def gaps_ms(stamps: list[int]) -> list[float]:
    """Milliseconds between consecutive content chunks.

    >>> gaps_ms([0, 2_000_000, 5_000_000])
    [2.0, 3.0]
    """
    return [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]
