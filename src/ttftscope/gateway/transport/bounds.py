"""Bounds on inbound connections, kept where uvicorn parses them (its httptools protocol).

uvicorn's httptools protocol puts no limit on a request's head and no clock on a
connection before its headers are in or while its body arrives: four connections sending
128 MB of headers took the gateway from 184 to 809 MB, and slowloris heads, idle sockets
and a never-ending chunked body were held until the file descriptors ran out. This
protocol refuses a head past ``max_header_kb`` or ``max_headers`` with a 431, closes a
connection whose head does not arrive within ``header_timeout_s`` (408 if part of it did)
or whose body does not within ``body_timeout_s`` (408), closes a keep-alive connection
idle for ``idle_timeout_s``, and runs each exchange under the total
:class:`~ttftscope.gateway.transport.deadline.Deadline`. Refusals speak the route's API format. An
answer that cannot be finished (:class:`~ttftscope.gateway.transport.asgi.CutShort`) closes its
connection through the scope's :data:`~ttftscope.gateway.transport.deadline.CLOSE_EXTENSION`.

The serving paths (:func:`~ttftscope.gateway.serve.serve`, the background gateway) both
take their protocol from :func:`bounded_protocol`::

    uvicorn.run(app, http=bounded_protocol(GatewaySettings()))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.transport.apierrors import api_format, error_response
from ttftscope.gateway.transport.deadline import CLOSE_EXTENSION, Deadline


@dataclass(frozen=True)
class ConnLimits:
    """What one inbound connection may take (the ``gateway.*`` settings of the same name).

    >>> ConnLimits.from_settings(GatewaySettings()).max_head_bytes
    65536
    """

    max_head_bytes: int
    max_headers: int
    header_timeout_s: float
    body_timeout_s: float
    idle_timeout_s: float
    request_timeout_s: float

    @classmethod
    def from_settings(cls, s: GatewaySettings) -> ConnLimits:
        return cls(
            max_head_bytes=s.max_header_kb << 10,
            max_headers=s.max_headers,
            header_timeout_s=s.header_timeout_s,
            body_timeout_s=s.body_timeout_s,
            idle_timeout_s=s.idle_timeout_s,
            request_timeout_s=s.request_timeout_s,
        )


def bounded_protocol(settings: GatewaySettings) -> type[asyncio.Protocol]:
    """The uvicorn ``http`` protocol class that keeps ``settings``' connection bounds.

    >>> bounded_protocol(GatewaySettings()).limits.max_headers
    100
    """
    limits = ConnLimits.from_settings(settings)
    return type("BoundedProtocol", (BoundedHttpTools,), {"limits": limits})


class _Refused(Exception):
    """A head past its limits: answered (431) and closed."""


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`ConnLimits` (``limits``, set per class)."""

    limits: ClassVar[ConnLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = Deadline(self.app, self.limits.request_timeout_s)
        # uvicorn's keep-alive timer takes its seconds as they come (call_later: a float)
        self.timeout_keep_alive = self.limits.idle_timeout_s  # type: ignore[assignment]
        self._in_head = True  # waiting for (or reading) a request's head
        self._head_bytes = 0  # bytes received while in the head (llhttp buffers them)
        self._head_size = 0  # the head's url, names and values so far
        self._header_count = 0
        self._timer: asyncio.TimerHandle | None = None

    # -- the connection -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.header_timeout_s, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            if self._timer is None:  # a keep-alive connection's next request begins
                self._arm(self.limits.header_timeout_s, self._head_late)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.limits.max_head_bytes:
            self._refuse_head()

    def send_400_response(self, msg: str) -> None:
        if not self.transport.is_closing():  # not after a refusal of ours stopped the parser
            super().send_400_response(msg)

    # -- httptools callbacks --------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        # an answer that cannot be finished closes the connection (asgi.CutShort), quietly:
        # uvicorn's own close of an unfinished answer logs it as the app's error
        self.scope.setdefault("extensions", {})[CLOSE_EXTENSION] = {"close": self._close}
        self._in_head = True
        self._head_size = self._header_count = 0

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        self._check_head()
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value)
        self._header_count += 1
        self._check_head()
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._disarm()
        self._arm(self.limits.body_timeout_s, self._body_late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head = True
        super().on_message_complete()

    # -- limits ---------------------------------------------------------------------------
    def _check_head(self) -> None:
        if (
            self._head_size > self.limits.max_head_bytes
            or self._header_count > self.limits.max_headers
        ):
            self._refuse_head()
            raise _Refused  # stops the parser (uvicorn's 400 for it is not sent)

    def _refuse_head(self) -> None:
        self._refuse(
            431,
            f"the request's headers are larger than the gateway accepts (at most "
            f"{self.limits.max_head_bytes >> 10} KB, gateway.max_header_kb, in at most "
            f"{self.limits.max_headers} headers, gateway.max_headers)",
        )

    def _head_late(self) -> None:
        self._timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            # bytes of a next request while an answer still streams: its clock starts later
            self._arm(self.limits.header_timeout_s, self._head_late)
        elif self._head_bytes == 0:
            self._close()  # nothing asked on this connection: nothing to answer
        else:
            seconds = self.limits.header_timeout_s
            self._refuse(
                408,
                f"the request's headers did not arrive within {seconds:g} s "
                "(gateway.header_timeout_s)",
            )

    def _body_late(self) -> None:
        self._timer = None
        if self.cycle is not None and self.cycle.response_started:
            self._close()  # answered already (a 413, a 404): only the rest of a body is late
            return
        seconds = self.limits.body_timeout_s
        self._refuse(
            408,
            f"the request's body did not arrive within {seconds:g} s (gateway.body_timeout_s)",
        )

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` in the route's API format, then close the connection."""
        if not self.transport.is_closing():
            path = httptools.parse_url(self.url).path.decode("latin-1") if self.url else ""
            response = error_response(api_format(path), status, message)
            head = [STATUS_LINE[status]]
            head += [name + b": " + value + b"\r\n" for name, value in response.raw_headers]
            head.append(b"connection: close\r\n\r\n")
            self.transport.write(b"".join(head) + response.body)
        self._close()

    def _close(self) -> None:
        self._disarm()
        if self.cycle is not None and not self.cycle.response_complete:
            # the app, waiting on the body, hears the client is gone and answers no one
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self, seconds: float, then: Callable[[], None]) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
