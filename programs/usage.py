"""Per-stage accounting of LM calls and tokens, through DSPy's callbacks and usage tracking.

A run installs a UsageMeter; each stage module calls its predictor through `call_predictor`, which
names the stage in a context variable. The meter's `on_lm_start` callback counts every LM request
(JSON-adapter fallbacks included) against that stage, and DSPy's usage tracker gives the tokens.
"""

from __future__ import annotations

import contextvars
import threading
from collections import defaultdict

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.usage_tracker import track_usage

from programs.artifacts import StageUsage

_stage: contextvars.ContextVar[str] = contextvars.ContextVar("deepresearch_stage", default="other")
_meter: contextvars.ContextVar["UsageMeter | None"] = contextvars.ContextVar("deepresearch_meter", default=None)


class UsageMeter(BaseCallback):
    """Counts LM calls and tokens per stage for one run."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: dict[str, int] = defaultdict(int)
        self._prompt: dict[str, int] = defaultdict(int)
        self._completion: dict[str, int] = defaultdict(int)

    def on_lm_start(self, call_id, instance, inputs):
        with self._lock:
            self._calls[_stage.get()] += 1

    def add_tokens(self, stage: str, usage: dict) -> None:
        with self._lock:
            for per_model in usage.values():
                self._prompt[stage] += int(per_model.get("prompt_tokens") or 0)
                self._completion[stage] += int(per_model.get("completion_tokens") or 0)

    @property
    def total_calls(self) -> int:
        return sum(self._calls.values())

    @property
    def total_tokens(self) -> int:
        return sum(self._prompt.values()) + sum(self._completion.values())

    def snapshot(self) -> dict[str, StageUsage]:
        with self._lock:
            stages = sorted(set(self._calls) | set(self._prompt) | set(self._completion))
            return {s: StageUsage(calls=self._calls[s], prompt_tokens=self._prompt[s],
                                  completion_tokens=self._completion[s]) for s in stages}


class metered:
    """Context manager that installs a meter for the code inside (a run)."""

    def __init__(self, meter: UsageMeter):
        self.meter = meter
        self._ctx = None

    def __enter__(self) -> UsageMeter:
        callbacks = [*dspy.settings.get("callbacks", []), self.meter]
        self._ctx = dspy.context(callbacks=callbacks)
        self._ctx.__enter__()
        self._token = _meter.set(self.meter)
        return self.meter

    def __exit__(self, *exc):
        _meter.reset(self._token)
        self._ctx.__exit__(*exc)


async def call_predictor(stage: str, predictor: dspy.Module, **inputs) -> dspy.Prediction:
    """Calls `predictor` asynchronously, attributing its LM calls and tokens to `stage`."""
    meter = _meter.get()
    token = _stage.set(stage)
    try:
        if meter is None:
            return await predictor.acall(**inputs)
        # A tracker per call: DSPy only tracks usage at the outermost module call otherwise.
        with track_usage() as tracker:
            out = await predictor.acall(**inputs)
        meter.add_tokens(stage, tracker.get_total_tokens())
        return out
    finally:
        _stage.reset(token)
