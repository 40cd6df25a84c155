"""Read a running gateway's ``/metrics`` in tests: one series summed over matching labels."""

from __future__ import annotations

import re

import httpx


def gateway_metric(port: int, name: str, *, key: str = "", **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none); ``key``
    is the gateway's inbound key, if it takes one."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=headers, timeout=10).text
    total = 0.0
    for m in re.finditer(rf"^{name}(?:\{{(.*)\}})? (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if labels.items() <= have.items():
            total += float(m.group(2))
    return total
