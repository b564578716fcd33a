"""An asyncio event loop on a virtual clock: sleeping costs no real time, computing costs no virtual time.

Under `run_virtual(coro)` the clock only moves when nothing can run: the loop jumps to its next timer.
The elapsed virtual time of a program whose only waits are `asyncio.sleep`s (a simulated LM and
retriever) is then the makespan of its waits alone; with unlimited concurrency caps that is the length
of its longest chain of dependent waits, its critical path. Work handed to threads (`asyncio.to_thread`)
is waited for in real time while the clock stands still, so it cannot reorder timers.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, instead of blocking for `timeout` seconds, advances the loop's clock by it."""

    def __init__(self, loop: VirtualTimeLoop):
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None):
        if self._loop.threads_running or timeout is None:
            return super().select(timeout)  # a thread or real I/O will wake the loop
        events = super().select(0)
        if not events and timeout > 0:
            self._loop.now += timeout
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self):
        self.now = 0.0
        self.threads_running = 0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self.now

    def run_in_executor(self, executor, func, *args):
        self.threads_running += 1
        future = super().run_in_executor(executor, func, *args)
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future) -> None:
        self.threads_running -= 1


def run_virtual(coro: Coroutine[Any, Any, Any]) -> tuple[Any, float]:
    """Runs `coro` to completion on a fresh virtual-time loop; returns its result and the virtual seconds."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        result = loop.run_until_complete(coro)
        return result, loop.now
    finally:
        asyncio.set_event_loop(None)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
