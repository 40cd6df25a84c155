"""Masking of secrets: one rule for everything that prints or records text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

from pydantic import SecretStr


def redact(secret: str | SecretStr | None) -> str:
    """A recognisable but useless form of a secret.

    >>> redact("sk-proj-0123456789abcdef")
    'sk-…cdef'
    >>> redact("short"), redact(None)
    ('…', '(not set)')
    """
    if isinstance(secret, SecretStr):
        secret = secret.get_secret_value()
    if secret is None:
        return "(not set)"
    if len(secret) < 16:  # showing 4-7 chars of a short key would give too much away
        return "…"
    dash = secret.find("-")
    prefix = secret[: dash + 1] if 0 < dash + 1 <= 3 else ""
    return f"{prefix}…{secret[-4:]}"


_BEARER = re.compile(r"(Bearer\s+)([A-Za-z0-9._~+/=-]{8,})")


def redact_text(text: str, secrets: Iterable[str | None]) -> str:
    """Replace each secret (plain or URL-encoded) and any ``Bearer <token>`` by its redacted form.

    >>> redact_text("Authorization: Bearer sk-0123456789abcdefXYZ", ["sk-0123456789abcdefXYZ"])
    'Authorization: Bearer sk-…fXYZ'
    """
    # Longest first, so a short secret inside a long one cannot leave the long one's remains.
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        masked = redact(secret)
        for form in dict.fromkeys((secret, quote(secret, safe=""))):
            text = text.replace(form, masked)
    return _BEARER.sub(lambda m: m.group(1) + redact(m.group(2)), text)
