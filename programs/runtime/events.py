"""Progress events: small records a program emits to one optional callback, and keeps for its trace."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

EventKind = Literal[
    "run_start",     # counts: the run's shape (strategy, depth, breadth, schedule)
    "node_planned",  # a node was added to the tree; it has not started (message: its query)
    "node_start",    # a node got its slot and began its own research
    "node_end",      # a node left its lifecycle; message: its final status (a NodeStatus)
    "stage_end",     # a step worth showing inside a node or a round (selection, deepen decision, round)
    "failure",       # an error was recorded on a node (stage and message say where and what)
    "fallback",      # a stage's answer was replaced by a stated fallback (e.g. the question as the plan)
    "budget",        # a budget, deadline or failure limit stopped the run, or running work was cancelled
    "prune",         # a subtree was stopped by the parallel strategy's monitor or depth policy
    "interrupt",     # the run was interrupted (a signal, or the caller's interrupt event)
    "run_end",       # message: the run's status (a RunStatus); counts: its stats
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)


@dataclass(frozen=True)
class Event:
    """Something that happened during a run, `elapsed_s` seconds after it started."""

    kind: EventKind
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

    def emit(self, kind: EventKind, **kw: Any) -> Event:
        if kind not in EVENT_KINDS:  # a typo here would silently vanish from every consumer
            raise ValueError(f"unknown event kind {kind!r}; choose one of: {', '.join(EVENT_KINDS)}")
        event = Event(kind=kind, elapsed_s=round(time.perf_counter() - self._t0, 4), **kw)
        self.events.append(event)
        if self.handler is not None:
            self.handler(event)
        return event
