"""Bounds on what a probe asks for, checked before anything is built or sent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttftscope.errors import ConfigError

if TYPE_CHECKING:
    from ttftscope.probe.experiments import ProbeOptions

# Larger than any model's context today; a bound, so a typo cannot make the probe build
# gigabytes of text.
MAX_CONTEXT_TOKENS = 10_000_000


def check_sizes(opts: ProbeOptions, max_model_len: int | None = None, model: str = "") -> None:
    """Refuse context sizes no server can take, before anything is built or sent.

    >>> from ttftscope.probe.experiments import ProbeOptions
    >>> check_sizes(ProbeOptions(context_tokens=[0, 8000]), max_model_len=131072)
    >>> check_sizes(ProbeOptions(context_tokens=[10**12]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ttftscope.ConfigError: --context-tokens 1,000,000,000,000 is above ...
    """
    largest = max(opts.context_tokens, default=0)
    if largest > MAX_CONTEXT_TOKENS:
        raise ConfigError(
            f"--context-tokens {largest:,} is above the largest context any model takes "
            f"({MAX_CONTEXT_TOKENS:,})",
            hint="give sizes in tokens, e.g. --context-tokens 0,8000,32000",
        )
    # every request also carries the conversation's turns and the tokens it generates
    turns = (1 + opts.num_warmups + opts.repeat) * (opts.turn_chars + 40) // 2
    room = turns + (opts.max_tokens or 16)
    if max_model_len is not None and largest + room > max_model_len:
        raise ConfigError(
            f"--context-tokens {largest:,} does not fit {model or 'the model'}'s "
            f"max_model_len of {max_model_len:,}: the conversation's turns add up to "
            f"~{room:,} tokens on top",
            hint=f"use sizes up to {max(0, max_model_len - room):,}, or fewer --repeat",
        )
