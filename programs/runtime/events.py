"""The event log: a run's progress events (deepresearch.programs.artifacts.Event), kept for its trace and sent to one callback."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from deepresearch.programs.artifacts import EVENT_KINDS, Event, EventKind

EventHandler = Callable[[Event], None]


class EventLog:
    """Collects a run's events and forwards each to the user's handler."""

    def __init__(self, handler: EventHandler | None = None):
        self.handler = handler
        self.events: list[Event] = []
        self._t0 = time.perf_counter()

    def emit(self, kind: EventKind, **kw: Any) -> Event:
        if kind not in EVENT_KINDS:  # a typo here would silently vanish from every consumer
            raise ValueError(f"unknown event kind {kind!r}; choose one of: {', '.join(EVENT_KINDS)}")
        event = Event(kind=kind, elapsed_s=round(time.perf_counter() - self._t0, 4), **kw)
        self.events.append(event)
        if self.handler is not None:
            self.handler(event)
        return event
