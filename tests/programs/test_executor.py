"""The local process pool: what a stop does to a job, and what an interrupt of the parent does to its loop."""

import _thread
import random
import threading

from deepresearch.programs.runtime.executor import JobFailed, LocalExecutor


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
