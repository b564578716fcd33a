"""Progress events: small records the program emits to one optional callback."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Something that happened during a run.

    kind is one of `run_start`, `node_start`, `node_end`, `stage_end`, `failure`, `budget`, `run_end`.
    """

    kind: str
    node_id: str = ""
    stage: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    elapsed_s: float = 0.0


EventHandler = Callable[[Event], None]


class EventLog:
    """Collects a run's events and forwards each to the user's handler."""

    def __init__(self, handler: EventHandler | None = None):
        self.handler = handler
        self.events: list[Event] = []
        self._t0 = time.perf_counter()

    def emit(self, kind: str, **kw: Any) -> None:
        event = Event(kind=kind, elapsed_s=round(time.perf_counter() - self._t0, 4), **kw)
        self.events.append(event)
        if self.handler is not None:
            self.handler(event)
