"""httpx's exceptions in the neutral transport vocabulary: the one place that reads them.

httpx wraps the operating system's error (refused, DNS, TLS) in its own ``ConnectError``,
``ReadError``, ... with the original chained; :func:`~ttftscope.errors.os_failure` reads that
chain, and httpx's own classes say the rest (a timeout, or an exchange that broke off after
connecting).

>>> httpx_fault(httpx.ReadTimeout("timed out"))
TransportFault(failure=<TransportFailure.TIMEOUT: 'timeout'>, error='ReadTimeout', text='timed out')
"""

from __future__ import annotations

import httpx

from ttftscope.client.classify import TransportFault
from ttftscope.errors import TransportFailure, cause_chain, os_failure

__all__ = ["httpx_fault"]

# connected, then the exchange stopped: the connection closed, reset, or carried no HTTP
_BROKEN = (httpx.ReadError, httpx.WriteError, httpx.CloseError, httpx.RemoteProtocolError)


def _failure(exc: BaseException) -> TransportFailure:
    if any(isinstance(e, httpx.TimeoutException) for e in cause_chain(exc)):
        return TransportFailure.TIMEOUT
    named = os_failure(exc)
    if named is not None:
        return named
    return TransportFailure.BROKEN if isinstance(exc, _BROKEN) else TransportFailure.CONNECT


def httpx_fault(exc: BaseException) -> TransportFault:
    """How an httpx request failed (an ``httpx.HTTPError`` or a bare ``OSError``).

    >>> httpx_fault(httpx.RemoteProtocolError("Server disconnected")).failure
    <TransportFailure.BROKEN: 'broken'>
    """
    return TransportFault(_failure(exc), type(exc).__name__, str(exc))
