"""The dev evaluations of `deepresearch optimize --ray`: the program before and after, scored on a Ray cluster.

Only the two dev evaluations are spread (each example is a whole run of the program); the optimizer's own
loop stays in the command's process on DSPy's threads, where its candidates and budget counter live. Each
dev example is one job: the worker builds the program and the metric from the command's options once
(`setup`, cli/optimize_run.py), loads the state of the program being scored, and scores the example as
`evaluate_scores` does in the command's process; the LM calls it made come back with the score.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import dspy

from deepresearch.optimize.compile import DevWatch, WatchCounts, evaluate_scores
from deepresearch.programs.lm.session import open_lm
from deepresearch.programs.runtime.executor import JobFailed, LocalExecutor, RayExecutor, working_in

# (options, LM session) -> (the program being tuned, its MetricSpec, a counter with .calls: role -> LM calls)
Setup = Callable[[argparse.Namespace, Any], tuple[dspy.Module, Any, Any]]

_BUILT: dict[str, tuple] = {}  # per worker process: what `setup` built for one command's options


def score_example(
    job: tuple[Setup, argparse.Namespace, str, dict, dspy.Example],
) -> tuple[float, dict[str, int], WatchCounts]:
    """The metric of one dev example under the program state `job` carries, the LM calls it took by role, and
    how its run went (`DevWatch`: its LM calls replied or failed, the program failed or not)."""
    setup, args, cwd, state, example = job
    with working_in(cwd):  # relative paths of the options, as the command saw them
        key = repr((getattr(setup, "func", setup).__qualname__, sorted(vars(args).items()), cwd))
        if key not in _BUILT:
            args = argparse.Namespace(**{**vars(args), "no_preflight": True})  # the command checked the LMs
            session = open_lm(args, default_offline=False)
            _BUILT.clear()  # one command's program per process
            _BUILT[key] = (session, *setup(args, session))
        session, program, spec, counter = _BUILT[key]
        candidate = program.deepcopy()
        candidate.load_state(state)
        before = dict(counter.calls)
        watch = DevWatch()
        with session.context():
            [score] = evaluate_scores(candidate, [example], spec, num_threads=1, watch=watch)
    used = {role: n - before.get(role, 0) for role, n in counter.calls.items() if n != before.get(role, 0)}
    return score, used, watch.counts()


class ExecutorEvaluator:
    """A `DevEvaluator` (optimize/compile.py) on `executor` (programs/runtime/executor.py), open in a `with`.

    `calls` adds up the LM calls of every evaluation by role (task, judge).
    """

    def __init__(self, executor: LocalExecutor | RayExecutor, setup: Setup, args: argparse.Namespace):
        self.executor, self.setup, self.args, self.cwd = executor, setup, args, os.getcwd()
        self.calls: dict[str, int] = {}
        self._pool: LocalExecutor | RayExecutor | None = None

    def __enter__(self) -> ExecutorEvaluator:
        self._pool = self.executor.__enter__()
        self.kind, self.workers = self._pool.kind, self._pool.workers
        return self

    def __exit__(self, *exc) -> None:
        self.executor.__exit__(*exc)

    def __call__(
        self, program: dspy.Module, devset: list[dspy.Example], watch: DevWatch | None = None
    ) -> tuple[list[float], dict[str, int]]:
        """The metric of each example of `devset` (in its order) and the LM calls made by role; each
        example's run is added to `watch` when one is given."""
        assert self._pool is not None, "use the evaluator in a with block"
        state = program.dump_state()
        scores: list[float] = [0.0] * len(devset)
        calls: dict[str, int] = {}
        jobs = [(self.setup, self.args, self.cwd, state, example) for example in devset]
        for index, result in self._pool.map_unordered(score_example, jobs):
            if isinstance(result, JobFailed):  # not a program error (that scores 0): the worker could not run
                raise RuntimeError(
                    f"dev example {index + 1} of {len(devset)} could not be scored on {self._pool.kind}: {result.error}"
                )
            scores[index], used, seen = result
            if watch is not None:
                watch.add(seen)
            for role, n in used.items():
                calls[role] = calls.get(role, 0) + n
                self.calls[role] = self.calls.get(role, 0) + n
        return scores, calls
