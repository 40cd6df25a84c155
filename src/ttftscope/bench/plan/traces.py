"""The public coding-agent traces the default bench workload follows: every figure, one place.

Source: the Claude Code traces published with kv-cache-tester
(https://github.com/callanjfox/kv-cache-tester): 642 conversations, 48,658 requests. Sizes
are tokens. What the default plan takes from them (:mod:`.workload`, :mod:`.conversations`):

- appends between turns: log-normal through the median and p90, capped at the p99;
- the answer's ``max_tokens``: the median output, unless ``--max-tokens``;
- every session: one tools block of the traces' size, shared by all sessions, and a
  system prompt of the traces' size;
- compaction (the context rewritten shorter) in 1 turn in 100;
- the median request's input sits inside the default ``--context-tokens`` range
  (86,000-123,000: its midpoint is 104,500), where sessions start.

``--scale`` multiplies every size here except the output (a CPU server gets the same shape,
smaller).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

TRACE_SOURCE = (
    "kv-cache-tester Claude Code traces (github.com/callanjfox/kv-cache-tester): "
    "642 conversations, 48,658 requests"
)
TRACE_CONVERSATIONS = 642
TRACE_REQUESTS = 48_658

REQUEST_INPUT_MEDIAN_TOKENS = 104_644
REQUEST_INPUT_P90_TOKENS = 235_882
APPEND_MEDIAN_TOKENS = 655  # tokens a turn adds to the conversation (tool results, user text)
APPEND_P90_TOKENS = 3_541
APPEND_P99_TOKENS = 16_439
OUTPUT_MEDIAN_TOKENS = 216
TOOLS_TOKENS = 12_300  # the tool definitions every request carries
SYSTEM_PROMPT_TOKENS = 2_800
COMPACTION_SHARE = 0.01  # turns at which the context is rewritten shorter

# Not in the traces' figures: how long the summary that replaces a compacted history is.
# Claude Code's compaction summaries run to a few thousand tokens; this is that order.
COMPACTION_SUMMARY_TOKENS = 3_000

_Z90 = NormalDist().inv_cdf(0.90)  # 1.2816: a normal variable's p90, in standard deviations


@dataclass(frozen=True)
class AppendShape:
    """A log-normal size in tokens through ``median`` and ``p90``, capped at ``cap``.

    >>> s = AppendShape(655, 3541, 16439); round(s.sigma, 3), s.size(0.0), s.size(10.0)
    (1.317, 655, 16439)
    >>> AppendShape(16, 16, 16).size(2.0)  # median == p90: every append the same size
    16
    """

    median: float
    p90: float
    cap: int

    @property
    def sigma(self) -> float:
        """The spread of the underlying normal (0 when median and p90 agree)."""
        return math.log(self.p90 / self.median) / _Z90

    def size(self, z: float) -> int:
        """The size at standard normal draw ``z``: at least one token, at most the cap."""
        return min(self.cap, max(1, round(self.median * math.exp(self.sigma * z))))


TRACE_APPENDS = AppendShape(APPEND_MEDIAN_TOKENS, APPEND_P90_TOKENS, APPEND_P99_TOKENS)
