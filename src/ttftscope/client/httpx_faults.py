"""httpx's exceptions as a :class:`~ttftscope.client.classify.TransportFault`: the neutral
failure (:func:`ttftscope.httpx_failure.httpx_failure`, shared with the metrics scrapers) and
the exception's own words for the message.

>>> import httpx
>>> httpx_fault(httpx.ReadTimeout("timed out"))
TransportFault(failure=<TransportFailure.TIMEOUT: 'timeout'>, error='ReadTimeout', text='timed out')
"""

from __future__ import annotations

from ttftscope.client.classify import TransportFault
from ttftscope.httpx_failure import httpx_failure

__all__ = ["httpx_fault"]


def httpx_fault(exc: BaseException) -> TransportFault:
    """How an httpx request failed (an ``httpx.HTTPError`` or a bare ``OSError``).

    >>> import httpx
    >>> httpx_fault(httpx.RemoteProtocolError("Server disconnected")).failure
    <TransportFailure.BROKEN: 'broken'>
    """
    return TransportFault(httpx_failure(exc), type(exc).__name__, str(exc))
