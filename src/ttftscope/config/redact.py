"""Masking of secrets: one rule for everything that prints or records text.

What counts as a secret: the configured API key, the values of credential headers (the
``Authorization`` family, ``api-key``, cookies) given by the user, any ``Bearer``/``Basic``
credential, and a URL's user info and query values. :func:`redact_text` masks all of them,
also inside text a server echoes back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import SecretStr

SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "x-auth-token",
        "cookie",
        "ocp-apim-subscription-key",
    }
)


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


def header_secrets(headers: Mapping[str, str] | None) -> list[str]:
    """The secret parts of credential headers: whole values and the token after a scheme.

    >>> header_secrets({"Authorization": "Bearer abc123", "X-Team": "infra"})
    ['Bearer abc123', 'abc123']
    """
    out: list[str] = []
    for name, value in (headers or {}).items():
        if name.strip().lower() in SENSITIVE_HEADERS and value.strip():
            out.append(value.strip())
            scheme, _, token = value.strip().partition(" ")
            if token.strip() and scheme.isalpha():
                out.append(token.strip())
    return out


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_QUERY_VALUE = re.compile(r"([?&][^=&#\s]*=)[^&#\s]*")


def redact_url(url: str) -> str:
    """The URL with user info and query values masked; safe to show anywhere.

    >>> redact_url("http://user:KEY@h:8000/v1?api_key=KEY&x=1")
    'http://***@h:8000/v1?api_key=***&x=***'
    >>> redact_url("http://127.0.0.1:8000/v1")
    'http://127.0.0.1:8000/v1'
    """
    start = url.find("//")
    if "@" in url[start + 2 :] and start >= 0:
        # everything up to the last "@" may be user info: a raw "/" in a password moves it
        # out of what urlsplit calls the netloc, so mask by position, not by parse
        url = url[: start + 2] + "***@" + url.rsplit("@", 1)[1]
    try:
        parts = urlsplit(url)
    except ValueError:  # unparsable: mask by pattern, never show it raw
        return _QUERY_VALUE.sub(r"\1***", url)
    netloc = parts.netloc
    query = _QUERY_VALUE.sub(r"\1***", "?" + parts.query)[1:] if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_BEARER = re.compile(r"(Bearer\s+)([A-Za-z0-9._~+/=-]{8,})", re.I)
_BASIC = re.compile(r"(Basic\s+)([A-Za-z0-9+/=]{8,})", re.I)


def redact_text(text: str, secrets: Iterable[str | None]) -> str:
    """Mask each secret (plain or URL-encoded), credentials and URL user info / query values.

    >>> redact_text("Authorization: Bearer sk-0123456789abcdefXYZ", ["sk-0123456789abcdefXYZ"])
    'Authorization: Bearer sk-…fXYZ'
    >>> redact_text("echo: Basic dXNlcjpwYXNzd29yZA== at http://u:p@h/v1", [])
    'echo: Basic *** at http://***@h/v1'
    """
    # Longest first, so a short secret inside a long one cannot leave the long one's remains.
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        masked = redact(secret)
        for form in dict.fromkeys((secret, quote(secret, safe=""))):
            text = text.replace(form, masked)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _BASIC.sub(r"\1***", text)  # user:password in base64: nothing of it is shown
    return _BEARER.sub(lambda m: m.group(1) + redact(m.group(2)), text)
