"""httpx's exceptions in the neutral transport vocabulary: the one place that reads them.

httpx wraps the operating system's error (refused, DNS, TLS) in its own ``ConnectError``,
``ReadError``, ... with the original chained; :func:`~ttftscope.errors.os_failure` reads that
chain, and httpx's own classes say the rest (a timeout, or an exchange that broke off after
connecting). It sits below ``client`` and ``metrics`` so that both, and everything above,
name a failure alike (``client.httpx_faults`` adds the exception's own words).

>>> httpx_failure(httpx.ReadTimeout("timed out"))
<TransportFailure.TIMEOUT: 'timeout'>
"""

from __future__ import annotations

import httpx

from ttftscope.errors import TransportFailure, cause_chain, os_failure

__all__ = ["httpx_failure"]

# connected, then the exchange stopped: the connection closed, reset, or carried no HTTP
_BROKEN = (httpx.ReadError, httpx.WriteError, httpx.CloseError, httpx.RemoteProtocolError)


def httpx_failure(exc: BaseException) -> TransportFailure:
    """How an httpx request failed (an ``httpx.HTTPError`` or a bare ``OSError``).

    >>> httpx_failure(httpx.RemoteProtocolError("Server disconnected"))
    <TransportFailure.BROKEN: 'broken'>
    """
    if any(isinstance(e, httpx.TimeoutException) for e in cause_chain(exc)):
        return TransportFailure.TIMEOUT
    named = os_failure(exc)
    if named is not None:
        return named
    return TransportFailure.BROKEN if isinstance(exc, _BROKEN) else TransportFailure.CONNECT
