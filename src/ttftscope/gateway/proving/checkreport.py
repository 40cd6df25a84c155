"""``ttftscope gateway check``: the conformance check of configured upstreams, as text or JSON.

Each upstream is started as the gateway starts it (tokenizer, models, version, ids API),
checked (:func:`~ttftscope.gateway.proving.conformance.check_upstream`) and closed. The text form
fits 80 columns: per upstream its version, profile, front end and ids API, then per API
and shape class ``ids`` or ``text`` and why. URLs are shown redacted; keys never.

>>> from ttftscope.gateway.pipeline.shapes import ShapeTable, Verdict
>>> c = UpstreamCheck("u", "http://h/v1", "0.34.0", "0.34", None, "chat-ids",
...     ShapeTable({("chat", "plain"): Verdict(True, "render: equal (35 ids)", "render")}))
>>> print(check_text([c]).splitlines()[3])
    plain                  ids   render: equal (35 ids)
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ttftscope.config.redact import redact_url
from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.pipeline.shapes import SHAPES, NativeApi
from ttftscope.gateway.pipeline.upstreams import upstreams_from
from ttftscope.gateway.proving.conformance import UpstreamCheck, check_upstream
from ttftscope.tokenization.loader import Tokenizer

__all__ = ["check_json", "check_text", "check_upstreams", "ids_anywhere"]

WIDTH = 80
_WHY_AT = 33  # the column where a class's reason starts


async def check_upstreams(settings: GatewaySettings, env: Mapping[str, str]) -> list[UpstreamCheck]:
    """Start, check and close every upstream of ``settings`` (keys read from ``env``)."""
    out: list[UpstreamCheck] = []
    loaded: dict[Path, Tokenizer] = {}
    for up in upstreams_from(settings.upstreams):
        try:
            await up.start(cache_bytes=1 << 20, shadow_every=0, env=env, loaded=loaded)
            out.append(await check_upstream(up))
        finally:
            await up.close()
    return out


def ids_anywhere(checks: list[UpstreamCheck]) -> bool:
    """Whether any (upstream, API, shape class) goes as ids."""
    return any(c.table.ids_count() for c in checks)


def _wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest) or [first]


def _blocked(c: UpstreamCheck, api: NativeApi) -> str:
    """The one reason the proven classes of ``api`` are kept from ids, if there is one."""
    found = {v.blocked for s in SHAPES[api] if (v := c.table.get(api, s)).blocked}
    return found.pop() if len(found) == 1 else ""


def _upstream_lines(c: UpstreamCheck) -> list[str]:
    front = f"rust {c.frontend}" if c.frontend else "python"
    lines = [f"upstream {c.name}  {redact_url(c.base_url)}"]
    head = (
        f"version {c.version or 'unknown'} | profile {c.profile or 'none'} | front end {front} "
        f"| ids via {c.api or 'none'} {c.api_reason}".rstrip()
    )
    lines += _wrap(head, "  ", "    ")
    if c.reason:
        return [*lines, *_wrap(f"all text: {c.reason}", "  ", "    ")]
    for api in SHAPES:
        n = c.table.ids_of(api)
        lines.append(f"  {api}: {n} of {len(SHAPES[api])} shape classes as ids")
        blocked = _blocked(c, api)
        if blocked:
            lines += _wrap(f"(text: {blocked})", "    ", "     ")
        for shape in SHAPES[api]:
            v = c.table.get(api, shape)
            why = v.why if not v.blocked or v.blocked == blocked else f"{v.why}; {v.blocked}"
            first = f"    {shape:<22} {'ids' if v.ids else 'text':<5} "
            lines += _wrap(why, first, " " * _WHY_AT)
    return lines


def check_text(checks: list[UpstreamCheck]) -> str:
    """The checks at 80 columns, one block per upstream, and the verdict on the last line."""
    lines: list[str] = []
    for c in checks:
        lines += [*_upstream_lines(c), ""]
    total = sum(c.table.ids_count() for c in checks)
    lines.append(
        f"{total} (upstream, API, shape class) pairs go as ids"
        if total
        else "nothing goes as ids: every request is sent as text"
    )
    return "\n".join(lines)


def check_json(checks: list[UpstreamCheck]) -> dict[str, Any]:
    """The checks as one JSON object (``--json``)."""
    return {
        "ids": ids_anywhere(checks),
        "upstreams": [
            {
                "name": c.name,
                "base_url": redact_url(c.base_url),
                "version": c.version,
                "profile": c.profile,
                "rust_frontend_version": c.frontend,
                "ids_api": c.api,
                "reason": c.reason or None,
                "shapes": [
                    {
                        "api": api,
                        "shape": shape,
                        "mode": "ids" if v.ids else "text",
                        "oracle": v.oracle,
                        "why": v.why,
                        "blocked": v.blocked or None,
                    }
                    for (api, shape), v in c.table.verdicts.items()
                ],
            }
            for c in checks
        ],
    }
