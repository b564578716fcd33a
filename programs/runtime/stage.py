"""The base of every stage module: async first, with a sync `forward` for optimizers and scripts."""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dspy


def run_sync(coro):
    """Runs a coroutine to completion from sync code, also inside a running event loop (notebooks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    ctx = contextvars.copy_context()  # keep dspy.context overrides in the worker thread
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()


class Shared:
    """Holds an object a program uses but must not copy or save (a retriever with a large index).

    Optimizers deep-copy programs; this keeps every copy pointing at the same retriever.
    """

    def __init__(self, obj: Any):
        self.obj = obj

    def __deepcopy__(self, memo):
        return self


class Stage(dspy.Module):
    """A dspy.Module whose logic lives in `aforward`; `forward` runs it to completion.

    DSPy's optimizers and `dspy.Evaluate` call modules synchronously, from worker threads.
    """

    def forward(self, **inputs) -> dspy.Prediction:
        return run_sync(self.aforward(**inputs))


def set_stage_lms(program: dspy.Module, stages: dict[str, str], lms: dict[str, Any] | None) -> None:
    """Gives each stage named in `lms` its own LM; `stages` maps stage names to the attributes of their modules.

    Raises:
        ValueError: for a name that is not a stage of `program` (the message lists them).
    """
    for name, lm in (lms or {}).items():
        if name not in stages:
            raise ValueError(f"unknown stage {name!r} in lms; choose from: {', '.join(stages)}")
        getattr(program, stages[name]).set_lm(lm)
