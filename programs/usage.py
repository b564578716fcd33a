"""Per-stage accounting of LM calls and tokens, through DSPy's usage tracker.

A run installs a UsageMeter as DSPy's usage tracker (`metered`); each stage module calls its predictor
through `call_predictor`, which names the stage in a context variable. DSPy hands the tracker one
usage entry per LM request it sends (JSON-adapter fallbacks and failed attempts included, cache hits
not), so the meter counts calls and tokens against the stage named at that moment. One tracker for
the whole run, rather than a callback or a tracker per call, keeps the per-call overhead near zero.
"""

from __future__ import annotations

import contextvars
import threading
from collections import defaultdict
from typing import Any

import dspy
from dspy.utils.usage_tracker import UsageTracker

from programs.artifacts import StageUsage

_stage: contextvars.ContextVar[str] = contextvars.ContextVar("deepresearch_stage", default="other")


class UsageMeter(UsageTracker):
    """Counts LM calls and tokens per stage (and per model within a stage) for one run."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._calls: dict[str, int] = defaultdict(int)
        self._prompt: dict[str, int] = defaultdict(int)
        self._completion: dict[str, int] = defaultdict(int)
        self._by_model: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        self.parent: UsageTracker | None = None  # the tracker this meter was installed inside, if any

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        if self.parent is not None:  # an enclosing meter or `dspy.track_usage` sees every call as it happens
            self.parent.add_usage(lm, usage_entry)
        stage = _stage.get()
        usage_entry = usage_entry or {}
        prompt = int(usage_entry.get("prompt_tokens") or 0)
        completion = int(usage_entry.get("completion_tokens") or 0)
        with self._lock:
            super().add_usage(lm, usage_entry)
            self._calls[stage] += 1
            self._prompt[stage] += prompt
            self._completion[stage] += completion
            tokens = self._by_model[stage][lm]
            tokens[0] += prompt
            tokens[1] += completion

    @property
    def total_calls(self) -> int:
        return sum(self._calls.values())

    @property
    def total_tokens(self) -> int:
        return sum(self._prompt.values()) + sum(self._completion.values())

    def tokens_by_model(self) -> dict[str, dict[str, tuple[int, int]]]:
        """stage -> model -> (prompt tokens, completion tokens)."""
        with self._lock:
            return {s: {m: (p, c) for m, (p, c) in models.items()} for s, models in self._by_model.items()}

    def snapshot(self) -> dict[str, StageUsage]:
        with self._lock:
            stages = sorted(set(self._calls) | set(self._prompt) | set(self._completion))
            return {s: StageUsage(calls=self._calls[s], prompt_tokens=self._prompt[s],
                                  completion_tokens=self._completion[s]) for s in stages}


class metered:
    """Context manager that makes `meter` DSPy's usage tracker for the code inside (a run)."""

    def __init__(self, meter: UsageMeter):
        self.meter = meter
        self._ctx = None

    def __enter__(self) -> UsageMeter:
        self._parent = self.meter.parent
        enclosing = dspy.settings.usage_tracker
        self.meter.parent = enclosing if enclosing is not self.meter else self._parent
        self._ctx = dspy.context(usage_tracker=self.meter)
        self._ctx.__enter__()
        return self.meter

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        self.meter.parent = self._parent


async def call_predictor(stage: str, predictor: dspy.Module, **inputs) -> dspy.Prediction:
    """Calls `predictor` asynchronously, attributing its LM calls and tokens to `stage`."""
    token = _stage.set(stage)
    try:
        return await predictor.acall(**inputs)
    finally:
        _stage.reset(token)
