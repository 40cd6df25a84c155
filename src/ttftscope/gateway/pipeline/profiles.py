"""How each vLLM release renders a request, as named rules: one code path serves every version.

vLLM's front end changes how a few request shapes render from one release to the next
(``shared/notes/vllm-versions.md``); everything else renders the same. Each such difference is
a :class:`Rule` with the release that introduced it, and a :class:`Profile` is the set of rules
in force on one server. The conversions (``vllm_chat``, ``vllm_messages``, ``vllm_responses``)
ask ``profile.has(rule)``; nothing else about a version is read anywhere.

A profile is a claim, not a proof: every upstream proves its profile at start-up against its
own rendering (:mod:`~ttftscope.gateway.proving.conformance`), shape class by shape class, and only
what matched goes as ids. A release newer than the newest known gets the newest profile and
the same proof; a release older than 0.32, or a server that is not vLLM, has no profile.

Some rules hang on what the gateway cannot see (the transformers version the server renders
with): such a rule is ``optional``, and the start-up check picks whichever variant the server
answers with.

>>> profile_for("0.34.0+cu129").has("tools_empty_is_none"), profile_for("0.33.1").name
(True, '0.33')
>>> profile_for("0.31.2") is None, profile_for("0.35.0").name
(True, '0.35 (as 0.34)')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

__all__ = ["BASELINE", "KNOWN", "RULES", "Profile", "Rule", "profile_for", "release_of"]


@dataclass(frozen=True)
class Rule:
    """One way a vLLM release renders differently from the one before it."""

    name: str
    since: tuple[int, int]  # the release that introduced it (major, minor)
    what: str  # what vLLM does differently from that release on
    gateway: str  # what the gateway does about it
    optional: bool = False  # depends on what the gateway cannot see; the check decides


RULES: tuple[Rule, ...] = (
    Rule(
        "namespace_content_format",
        (0, 33),
        "content-format detection follows Jinja namespace aliases of `messages`",
        "such templates' content format is uncertain to the gateway: text on every release",
    ),
    Rule(
        "reasoning_effort_map",
        (0, 33),
        "--reasoning-effort-map rewrites reasoning_effort before the template sees it",
        "a server flag the gateway cannot see: the start-up check catches it (effort class)",
    ),
    Rule(
        "truncate_one_fewer",
        (0, 33),
        "truncation keeps one token fewer when no max tokens are given",
        "truncate_prompt_tokens goes as text on every release",
    ),
    Rule(
        "messages_render_disabled_effort",
        (0, 33),
        "/v1/messages/render applies the disabled-thinking effort like /v1/messages",
        "the start-up check compares messages through chat where the route differs",
    ),
    Rule(
        "assistant_thinking_key",
        (0, 34),
        "assistant messages with reasoning also carry `thinking` (transformers 5.21+)",
        "reproduced; the start-up check decides (the server's transformers is not seen)",
        optional=True,
    ),
    Rule(
        "tool_reference_one_message",
        (0, 34),
        "an Anthropic tool_result holding tool_reference blocks is one tool message",
        "reproduced (before: a text tool message, then one of the references)",
    ),
    Rule(
        "thinking_between_tools",
        (0, 34),
        'Anthropic thinking {"type": "between_tools"} is accepted as disabled',
        "reproduced (before: vLLM's 400, the request goes as text to get it)",
    ),
    Rule(
        "tools_empty_is_none",
        (0, 34),
        "chat `tools: []` means no tools (0.32/0.33 answer 400)",
        "reproduced (before: vLLM's 400, the request goes as text to get it)",
    ),
    Rule(
        "responses_input_normalized",
        (0, 34),
        "Responses assistant items without `type`, empty assistant content accepted",
        "such items go as text on every release (Codex's typed items are unchanged)",
    ),
)
_BY_NAME = {r.name: r for r in RULES}
KNOWN: tuple[tuple[int, int], ...] = ((0, 32), (0, 33), (0, 34))
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?")


@dataclass(frozen=True)
class Profile:
    """The rules in force on one upstream; ``off`` holds optional rules the check turned off."""

    name: str
    release: tuple[int, int]
    off: frozenset[str] = field(default=frozenset())

    def has(self, rule: str) -> bool:
        """Whether ``rule`` applies (an unknown name is a bug, not a silent False).

        >>> profile_for("0.32.0").has("tools_empty_is_none")
        False
        """
        r = _BY_NAME[rule]
        return self.release >= r.since and rule not in self.off

    @property
    def optional(self) -> tuple[str, ...]:
        """The optional rules of this release (variants the start-up check chooses between)."""
        return tuple(r.name for r in RULES if r.optional and self.release >= r.since)

    def without(self, rule: str) -> Profile:
        """This profile with the optional ``rule`` turned off.

        >>> profile_for("0.34.0").without("assistant_thinking_key").has("assistant_thinking_key")
        False
        """
        assert _BY_NAME[rule].optional, f"{rule} is not optional"
        return replace(self, off=self.off | {rule})

    def rules(self) -> list[Rule]:
        """The rules in force, oldest first."""
        return [r for r in RULES if self.has(r.name)]


def release_of(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a vLLM version string, or None if it is not one.

    >>> release_of("0.34.0+cpu"), release_of("v0.33.1rc1"), release_of("dev")
    ((0, 34), (0, 33), None)
    """
    m = _RELEASE.match(version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def profile_for(version: str | None) -> Profile | None:
    """The profile of a vLLM ``version``; None where the gateway sends only text.

    Older than 0.32 (the first release whose id channel and rendering were checked) or not a
    version: None. Newer than the newest known: the newest profile, named for what it is.
    """
    release = release_of(version)
    if release is None or release < KNOWN[0]:
        return None
    newest = KNOWN[-1]
    if release > newest:
        name = f"{release[0]}.{release[1]} (as {newest[0]}.{newest[1]})"
        return Profile(name, newest)
    return Profile(f"{release[0]}.{release[1]}", release)


# the first release the gateway reproduces: what a conversion assumes when not told
BASELINE = Profile("0.32", KNOWN[0])
