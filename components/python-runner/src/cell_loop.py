"""The event loop cells with top-level `await` run on.

asyncio's own loops wait on a selector over sockets and wake themselves
through a socket pair, which WebAssembly has not. Cells have no sockets to
wait on, so this loop waits only for time: timers, sleeps, tasks and
futures all work; a wait on nothing that could ever finish is an error
rather than a hang. It holds no host handle, so a session's saved state
keeps it.
"""

import asyncio
import time


class _TimeOnlySelector:
    """Stands in for the selector: no descriptors, only the wait."""

    def select(self, timeout=None):
        if timeout is None:
            raise RuntimeError("the cell awaits something that nothing will ever finish: no task is ready and no timer is set")
        if timeout > 0:
            time.sleep(timeout)
        return []

    def close(self):
        pass


class CellLoop(asyncio.BaseEventLoop):
    """A `BaseEventLoop` whose only events are timers."""

    def __init__(self):
        super().__init__()
        self._selector = _TimeOnlySelector()

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass
