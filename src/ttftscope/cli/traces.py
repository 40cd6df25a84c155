"""Whether a probe or bench runs the trace receiver, and on which port.

The decision is :func:`ttftscope.localstate.trace_port_for`, shared with ``instrument``:
``[observability] read_traces`` ``"auto"`` (the default) runs it when the target is the local
server and that server was started exporting its spans (``local-server start`` records the
port); ``"on"`` always, on ``trace_receiver_port`` (a vLLM you started yourself with
``--otlp-traces-endpoint http://127.0.0.1:PORT/v1/traces``); ``"off"`` never. Without the
``trace`` extra there is no receiver.
"""

from __future__ import annotations

from ttftscope.localstate import is_local_server, trace_port_for

__all__ = ["is_local_server", "trace_port_for"]
