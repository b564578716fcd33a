"""Running a DSPy optimizer by name under a budget, with a before/after table on the dev split."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import dspy

from deepresearch.optimize.metrics import MetricSpec, as_gepa_metric, as_metric
from deepresearch.programs.runtime.usage import UsageMeter, metered

logger = logging.getLogger(__name__)

OPTIMIZERS = ("gepa", "miprov2", "bootstrap-rs", "simba")


@dataclass(frozen=True)
class CompileResult:
    """A tuned program and how it compares with the program it started from, on the dev split."""

    program: dspy.Module
    optimizer: str
    metric: str
    before: float
    after: float
    metric_budget: int
    lm_calls: int
    n_train: int
    n_dev: int

    def table(self) -> str:
        return ("| program | dev " + self.metric + " |\n|---|---|\n"
                f"| before | {self.before:.4f} |\n| after ({self.optimizer}) | {self.after:.4f} |\n"
                f"| change | {self.after - self.before:+.4f} |")


def evaluate(program: dspy.Module, devset: list[dspy.Example], spec: MetricSpec, num_threads: int = 4,
             show_progress: bool = False) -> float:
    """Mean metric over `devset`, in [0, 1] (a program error scores 0)."""
    if not devset:
        raise ValueError("the dev split is empty; give more examples or a --dev file")
    result = dspy.Evaluate(devset=devset, metric=as_metric(spec), num_threads=num_threads,
                           display_progress=show_progress, failure_score=0.0, max_errors=len(devset) + 1)(program)
    return sum(float(score) for *_, score in result.results) / len(devset)  # .score is rounded to 0.01%


def _optimizer(name: str, spec: MetricSpec, budget: int, n_train: int, n_dev: int, prompt_lm, num_threads: int,
               seed: int):
    """The optimizer and its compile keyword arguments, sized so metric calls stay within `budget`."""
    metric = as_metric(spec)
    if name == "gepa":
        if prompt_lm is None:
            raise ValueError("gepa needs a reflection LM; pass --prompt-lm (or --lm, used for both)")
        opt = dspy.GEPA(metric=as_gepa_metric(spec), max_metric_calls=budget, reflection_lm=prompt_lm,
                        reflection_minibatch_size=min(3, n_train), num_threads=num_threads, track_stats=True,
                        seed=seed)
        return opt, {}
    if name == "bootstrap-rs":
        # Each candidate program is scored on the training set; DSPy adds 3 seed candidates to those asked for.
        candidates = max(1, budget // n_train - 3)
        opt = dspy.BootstrapFewShotWithRandomSearch(metric=metric, max_bootstrapped_demos=2, max_labeled_demos=0,
                                                    num_candidate_programs=candidates, num_threads=num_threads)
        return opt, {}
    if name == "simba":
        bsize = max(1, min(4, n_train))
        num_candidates = 2
        steps = max(1, budget // (bsize * (num_candidates + 1)))
        opt = dspy.SIMBA(metric=metric, bsize=bsize, num_candidates=num_candidates, max_steps=steps, max_demos=2,
                         prompt_model=prompt_lm, num_threads=num_threads)
        return opt, {"seed": seed}
    if name == "miprov2":
        try:
            import optuna  # noqa: F401
        except ImportError as err:
            raise ImportError("miprov2 needs optuna; install it with: pip install 'dspy-deepresearch[miprov2]'") from err
        trials = max(1, budget // n_train)
        opt = dspy.MIPROv2(metric=metric, prompt_model=prompt_lm, auto=None, num_candidates=2,
                           max_bootstrapped_demos=2, max_labeled_demos=0, num_threads=num_threads, seed=seed,
                           verbose=False)
        return opt, {"num_trials": trials, "minibatch": False}
    raise ValueError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")


def compile_program(program: dspy.Module, *, optimizer: str, spec: MetricSpec, trainset: list[dspy.Example],
                    devset: list[dspy.Example], budget: int, max_lm_calls: int | None = None, prompt_lm=None,
                    num_threads: int = 4, seed: int = 0, show_progress: bool = False) -> CompileResult:
    """Tunes `program` with `optimizer` on `trainset` and scores it before and after on `devset`.

    The dev split is held out: optimizers select candidates on the training set only.

    Args:
        budget: Metric calls the optimizer may spend (its parameters are derived from it).
        max_lm_calls: LM calls the whole run may spend; after the baseline the metric budget is
            lowered to what the measured LM calls per example allow.
        prompt_lm: The LM that proposes instructions (GEPA's reflection, MIPROv2's and SIMBA's prompt model).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1 metric call, got {budget}")
    if not trainset:
        raise ValueError("the training split is empty; give more examples or a --train file")
    if optimizer == "miprov2" and len(trainset) < 2:  # MIPROv2 splits its own validation set off the trainset
        raise ValueError(f"miprov2 needs at least 2 training examples, got {len(trainset)}; give more examples "
                         f"(or --dev for a separate dev set) or choose another optimizer")
    meter = UsageMeter()
    with metered(meter):
        before = evaluate(program, devset, spec, num_threads, show_progress)
        if max_lm_calls is not None:
            per_example = max(meter.total_calls / len(devset), 1e-9)
            left = max_lm_calls - meter.total_calls - math.ceil(per_example * len(devset))  # keep the final eval
            budget = max(1, min(budget, int(left // per_example)))
            logger.info("metric budget %d after the LM-call budget (%.1f calls per example)", budget, per_example)
        opt, kwargs = _optimizer(optimizer, spec, budget, len(trainset), len(devset), prompt_lm, num_threads, seed)
        tuned = opt.compile(program.deepcopy(), trainset=trainset, **kwargs)
        after = evaluate(tuned, devset, spec, num_threads, show_progress)
    return CompileResult(program=tuned, optimizer=optimizer, metric=spec.name, before=before, after=after,
                         metric_budget=budget, lm_calls=meter.total_calls, n_train=len(trainset), n_dev=len(devset))
