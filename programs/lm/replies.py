"""Whether the LM answered at all: the calls made inside a block, counted as they end, from every thread.

A program that catches its stage failures (a research node records them and goes on) ends normally when the
server is down, and its output scores like a poor answer. `LMReplies` tells the two apart by what the LM
calls themselves got: a reply (from the server or the cache) or an error, whose cause `explain` words,
naming the server. It is a DSPy callback installed for a block with `watching()`, so it sees the calls of
every thread and task started inside the block (DSPy's evaluation threads inherit the settings) and none of
the calls made elsewhere, a judge's in a metric for instance.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

from deepresearch.programs.lm.models import explain, summarize_failures

KEPT_CAUSES = 50  # the causes kept for the summary: the first calls' say what went wrong


@dataclass(frozen=True)
class ReplyCounts:
    """What `LMReplies` counted, as plain data (it crosses process boundaries: optimize/remote.py)."""

    answered: int = 0
    failed: int = 0
    causes: tuple[str, ...] = ()

    def cause(self) -> str | None:
        """The most frequent cause of the failed calls (one line, naming the server), or None."""
        return summarize_failures(self.causes)


class LMReplies(BaseCallback):
    """Counts the LM calls made inside `watching()` blocks: those that returned (cache hits included) and
    those that raised, with each failure's cause in words (`explain`).

    Example:
        >>> replies = LMReplies()                                          # doctest: +SKIP
        >>> with replies.watching():                                       # doctest: +SKIP
        ...     program(question="...")
        >>> replies.counts().cause()                                       # doctest: +SKIP
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: dict[str, Any] = {}  # call id -> the LM called, until the call ends
        self._answered = 0
        self._failed = 0
        self._causes: list[str] = []

    @contextlib.contextmanager
    def watching(self) -> Iterator[LMReplies]:
        """Counts the LM calls made inside the block (in its threads and tasks too)."""
        with dspy.context(callbacks=[*(dspy.settings.get("callbacks") or []), self]):
            yield self

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self._calls[call_id] = instance

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        with self._lock:
            lm = self._calls.pop(call_id, None)
        cause = None if exception is None else explain(exception, lm)
        with self._lock:
            if exception is None:
                self._answered += 1
                return
            self._failed += 1
            if len(self._causes) < KEPT_CAUSES and cause is not None:  # a failure: it has a cause
                self._causes.append(cause)

    def add(self, counts: ReplyCounts) -> None:
        """Adds what another `LMReplies` counted (a worker's)."""
        with self._lock:
            self._answered += counts.answered
            self._failed += counts.failed
            self._causes.extend(counts.causes[: max(0, KEPT_CAUSES - len(self._causes))])

    def counts(self) -> ReplyCounts:
        with self._lock:
            return ReplyCounts(self._answered, self._failed, tuple(self._causes))
