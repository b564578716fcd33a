"""The local process pool: what a stop does to a job, and what an interrupt of the parent does to its loop; and
DSPy's thread pool, which must run each example of an evaluation once."""

import _thread
import random
import threading
import time
from collections import Counter

import dspy
from dspy.utils.parallelizer import ParallelExecutor

from deepresearch.programs.runtime.executor import JobFailed, LocalExecutor, one_run_per_example


def test_an_interrupt_of_the_parent_ends_its_loop_and_never_becomes_a_jobs_failure():
    # the interrupt lands wherever the parent is: waiting for results, or taking one; a handler that took every
    # exception of a result for the job's recorded one turned about one interrupt in fourteen into a failed job,
    # and the command went on (it then exited 1 with a query recorded as an error instead of 130)
    rng = random.Random(0)
    caught, failed = 0, []
    with LocalExecutor(workers=2) as pool:
        for _ in range(100):
            threading.Timer(rng.uniform(0.005, 0.05), _thread.interrupt_main).start()
            try:
                for _, result in pool.map_unordered(abs, list(range(-100_000, 0))):
                    if isinstance(result, JobFailed):
                        failed.append(result.error)
            except KeyboardInterrupt:
                caught += 1
    assert failed == [] and caught == 100


def test_a_job_that_a_stop_ends_is_a_failed_job_named_as_stopped():
    with LocalExecutor(workers=1) as pool:
        pool.stop()
        results = list(pool.map_unordered(abs, [-1]))
    assert results == []  # no job starts after a stop
    with LocalExecutor(workers=2) as pool:
        results = []
        for index, result in pool.map_unordered(_stopped_then_slow, [0.0, 30.0]):
            results.append((index, result))
            if index == 0:
                pool.stop()  # the second job is running: it ends now, as a failed job, not after 30 s
    assert results[0] == (0, 0.0)
    assert results[1][0] == 1 and isinstance(results[1][1], JobFailed)
    assert results[1][1].error.startswith("JobStopped")


def _stopped_then_slow(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def _evaluate_slow_examples(n: int) -> Counter:
    """How many times each of `n` examples ran when `dspy.Evaluate` scored a program that takes 1.5 s on each
    (DSPy looks for stragglers once a second), counted after every copy left running had time to end."""
    runs: Counter = Counter()
    lock = threading.Lock()

    class Slow(dspy.Module):
        def forward(self, question):
            with lock:
                runs[question] += 1
            time.sleep(1.5)
            return dspy.Prediction(answer=question)

    devset = [dspy.Example(question=f"q{i}").with_inputs("question") for i in range(n)]
    dspy.Evaluate(devset=devset, metric=lambda x, pred, trace=None: 1.0, num_threads=2 * n)(Slow())
    time.sleep(2.0)
    return runs


def test_dspy_runs_each_example_once_inside_one_run_per_example(monkeypatch):
    """DSPy's thread pool starts a second copy of an example still running after its straggler timeout (120 s,
    0.3 s here) and leaves the first running: with a local model, the tail of every evaluation ran twice or more."""
    timeout = list(ParallelExecutor.__init__.__defaults__)
    timeout[-2] = 0.3  # (..., timeout, straggler_limit)
    monkeypatch.setattr(ParallelExecutor.__init__, "__defaults__", tuple(timeout))
    # DSPy's default: each example ran more than once (a copy still running is copied again)
    assert min(_evaluate_slow_examples(2).values()) >= 2
    with one_run_per_example():
        assert _evaluate_slow_examples(2) == {"q0": 1, "q1": 1}
    assert ParallelExecutor(num_threads=2).timeout == 0.3  # DSPy's own setting is back after the block
