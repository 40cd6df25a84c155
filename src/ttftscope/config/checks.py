"""Checks of values that travel on the wire: URLs, header names and values, API keys.

Each check raises ``ValueError`` with a reason that never quotes the value (a URL or key may
hold a secret); the loader adds where the value came from. Checks run when settings load,
so a bad value fails before any request, with a message instead of a library's traceback.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

import httpx

# RFC 9110 token characters: what a header name may consist of.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# A header value or key: visible ASCII and inner spaces/tabs, nothing else.
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")


def _split(url: str) -> SplitResult:
    if not url.isascii() or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise ValueError(
            "must be a plain URL: it has spaces, control characters or non-ASCII text "
            "(write international host names in their xn-- form)"
        )
    if "@" in url:  # user info; a raw "/" or "%" in a password hides it from urlsplit
        raise ValueError(
            "must not hold a user name or password (user:key@host): put the key in "
            "api.api_key or the OPENAI_API_KEY environment variable"
        )
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number from 0 to 65535
    except ValueError:
        raise ValueError("has a port that is not a number from 1 to 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must start with http:// or https:// and name a host")
    if port == 0:
        raise ValueError("has a port that is not a number from 1 to 65535")
    if parts.query or parts.fragment:
        raise ValueError("must not contain a query string or fragment ('?...', '#...')")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:  # what httpx would refuse at request time
        raise ValueError(f"is not a URL httpx can send to ({type(exc).__name__})") from None
    return parts


def check_http_url(url: str) -> str:
    """An absolute http(s) URL with a host and a valid port, no credentials and no query.

    >>> check_http_url("http://127.0.0.1:8000/metrics")
    'http://127.0.0.1:8000/metrics'
    >>> check_http_url("http://127.0.0.1:99999/metrics")
    Traceback (most recent call last):
    ...
    ValueError: has a port that is not a number from 1 to 65535
    """
    _split(url)
    return url


def check_base_url(url: str) -> str:
    """Reject URLs that are not an API base; return the URL without a trailing slash.

    >>> check_base_url("http://host:8000/v1/")
    'http://host:8000/v1'
    """
    path = _split(url).path.rstrip("/")
    for tail in ("/chat/completions", "/completions"):
        if path.endswith(tail):
            raise ValueError(f"must be the API base, not the endpoint (it ends in {tail})")
    return url.rstrip("/")


def check_api_key(key: str) -> str:
    """A key that can go in an ``Authorization`` header: visible ASCII, no stray whitespace.

    >>> check_api_key("sk-test-123")
    'sk-test-123'
    >>> check_api_key("sk-test-123\\n")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: has a character an HTTP header cannot carry (non-ASCII, a space or a control ...
    """
    if not re.fullmatch(r"[\x21-\x7e]+", key):
        raise ValueError(
            "has a character an HTTP header cannot carry (non-ASCII, a space or a control "
            "character such as a trailing newline); paste the key again without it"
        )
    return key


def check_header(name: str, value: str) -> tuple[str, str]:
    """A header name (RFC 9110 token) and a value of visible ASCII; returns both.

    >>> check_header("X-Team", "infra")
    ('X-Team', 'infra')
    >>> check_header("X-Team", "café")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: header 'X-Team' has a value with non-ASCII or control characters; HTTP ...
    """
    if not _TOKEN.fullmatch(name):
        raise ValueError(
            "has a header name with characters HTTP does not allow (letters, digits and "
            "!#$%&'*+.^_`|~- only)"
        )
    if value and not _HEADER_VALUE.fullmatch(value):
        raise ValueError(
            f"header {name!r} has a value with non-ASCII or control characters; HTTP "
            "headers carry ASCII only"
        )
    return name, value
