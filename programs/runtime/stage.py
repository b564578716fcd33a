"""The base of every stage module: async first, with a sync `forward` for optimizers and scripts."""

from __future__ import annotations

from typing import Any

import dspy

from deepresearch.retrievers.types import run_sync


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

    DSPy's optimizers and `dspy.Evaluate` call modules synchronously, from worker threads. A stage's offline
    twin subclasses its LM module, so it holds the same predictors, and sets `is_offline`.
    """

    is_offline = False

    @classmethod
    def from_config(cls, config: Any, retriever: Any) -> Stage:
        """The stage for a run of `config` over `retriever` (the registry builds programs with it); a stage
        whose constructor takes settings overrides it."""
        return cls()

    def forward(self, **inputs) -> dspy.Prediction:
        return run_sync(self.aforward(**inputs))


def teach(predictor: dspy.Module, inputs: dict[str, Any], **outputs: Any) -> None:
    """Records an offline twin's answer as a call of `predictor`, in DSPy's trace.

    The twin answers without an LM; recorded this way, its answer is what an optimizer collects as a
    demonstration for the LM module's predictor of the same name (`BootstrapFewShot(...).compile(program,
    teacher=program.offline(), ...)`). `inputs` are the predictor's input fields as the LM module would send
    them, `outputs` its output fields (a `ChainOfThought`'s `reasoning` too).

    Raises:
        ValueError: when `inputs` or `outputs` miss a field of the predictor's signature (a twin out of step
            with its signature).
    """
    trace = dspy.settings.trace
    if trace is None or dspy.settings.max_trace_size <= 0:
        return
    predict = getattr(predictor, "predict", predictor)  # a ChainOfThought's inner Predict is what is traced
    signature = predict.signature
    missing = [k for k in (*signature.input_fields, *signature.output_fields) if k not in {**inputs, **outputs}]
    if missing:
        raise ValueError(f"{type(predictor).__name__} of {signature.__name__}: the twin's answer lacks {missing}")
    if len(trace) >= dspy.settings.max_trace_size:
        trace.pop(0)
    trace.append((predict, dict(inputs), dspy.Prediction(**outputs)))


def set_stage_lms(program: dspy.Module, stages: dict[str, str], lms: dict[str, Any] | None) -> None:
    """Gives each stage named in `lms` its own LM; `stages` maps stage names to the attributes of their modules.

    Raises:
        ValueError: for a name that is not a stage of `program` (the message lists them).
    """
    for name, lm in (lms or {}).items():
        if name not in stages:
            raise ValueError(f"unknown stage {name!r} in lms; choose from: {', '.join(stages)}")
        getattr(program, stages[name]).set_lm(lm)
