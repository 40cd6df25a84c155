"""What a running gateway changes in its process (GC, the switch interval), given back when
the last gateway of the process stops.

>>> import sys; before = sys.getswitchinterval(); host = HostTuning()
>>> host.tune(); sys.getswitchinterval() == SWITCH_INTERVAL_S
True
>>> host.restore(); sys.getswitchinterval() == before
True
"""

from __future__ import annotations

import gc
import sys
import threading

from ttftscope.gateway.runtime.workpool import SWITCH_INTERVAL_S

__all__ = ["HOST", "HostTuning"]


class HostTuning:
    """What a running gateway changes in its process, and gives back when the last one stops.

    ``tune``: ``gc.freeze()`` and a ``SWITCH_INTERVAL_S`` switch interval; ``restore``: unfreeze
    (unless objects were frozen before) and the interval before. Counted: gateways overlapping
    in one process (tests, the demo) leave it as the first one found it.

    >>> import sys; before = sys.getswitchinterval(); host = HostTuning()
    >>> host.tune(); sys.getswitchinterval() == SWITCH_INTERVAL_S
    True
    >>> host.restore(); sys.getswitchinterval() == before
    True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._interval = 0.0
        self._unfreeze = False

    def tune(self) -> None:
        with self._lock:
            if self._users == 0:
                self._interval = sys.getswitchinterval()
                self._unfreeze = gc.get_freeze_count() == 0
            self._users += 1
            gc.freeze()
            sys.setswitchinterval(SWITCH_INTERVAL_S)  # the loop gets the GIL back sooner

    def restore(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setswitchinterval(self._interval)
                if self._unfreeze:
                    gc.unfreeze()


HOST = HostTuning()  # one per process: gc and the switch interval are process-wide
