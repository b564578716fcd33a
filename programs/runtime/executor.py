"""Where independent jobs run: a local process pool, or a Ray cluster.

Research runs of different questions share nothing, so a batch of them spreads over processes or machines
with no coordination beyond collecting the results. One interface covers both places:

    with open_executor(workers=2) as pool:              # concurrent.futures, on this machine
        for index, result in pool.map_unordered(fn, jobs): ...
    with open_executor(ray="auto") as pool:             # a running Ray cluster (the [ray] extra)

`fn` must be a module-level function (it is pickled by name) taking one picklable job; each result comes
back as soon as its job ends, as (index of the job, value), or (index, JobFailed) when the job raised or
its process died. On Ray a job whose worker process dies is run again (`max_retries`); a job must
therefore be safe to run twice (the batch's runs are: each resumes from its folder's journal).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from deepresearch.programs.lm.secrets import redact
from deepresearch.retrievers.extras import require


@dataclass
class JobFailed:
    """A job that raised, or whose process died; `error` is one line, secrets removed."""

    error: str


def _failed(err: BaseException) -> JobFailed:
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return JobFailed(redact(f"{type(err).__name__}: {first}" if first else type(err).__name__))


class LocalExecutor:
    """`workers` processes of this machine (spawned: no thread or lock state is inherited)."""

    kind = "local"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or min(2, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalExecutor:
        self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def map_unordered(self, fn: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        assert self._pool is not None, "use the executor in a with block"
        futures = {self._pool.submit(fn, job): i for i, job in enumerate(jobs)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                try:
                    yield futures[future], future.result()
                except BaseException as err:  # the job raised, or its process died (BrokenProcessPool)
                    yield futures[future], _failed(err)


class RayExecutor:
    """Tasks on a Ray cluster: `address` is `auto` (the cluster this machine belongs to) or `HOST:PORT`.

    Each job is one Ray task asking for `cpus_per_job` CPUs; a task whose worker dies is run again up to
    `max_retries` times.
    """

    kind = "ray"

    def __init__(self, address: str = "auto", cpus_per_job: float = 1.0, max_retries: int = 3):
        self.ray = require("ray", "ray", "a Ray cluster (--ray)")
        self.address, self.cpus_per_job, self.max_retries = address, cpus_per_job, max_retries
        self.workers = 0

    def __enter__(self) -> RayExecutor:
        ray = self.ray
        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
        self.workers = int(ray.cluster_resources().get("CPU", 0) // self.cpus_per_job) or 1
        return self

    def __exit__(self, *exc) -> None:
        self.ray.shutdown()

    def map_unordered(self, fn: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        ray = self.ray
        task = ray.remote(num_cpus=self.cpus_per_job, max_retries=self.max_retries)(fn)
        refs = {task.remote(job): i for i, job in enumerate(jobs)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    yield refs[ref], ray.get(ref)
                except BaseException as err:  # the task raised, or failed past its retries
                    yield refs[ref], _failed(err)


@contextlib.contextmanager
def working_in(folder: str | None) -> Iterator[None]:
    """Runs a job in `folder` (the folder its command was started in, so relative paths resolve as there),
    then goes back; a folder this machine lacks (a Ray worker elsewhere) is left as it is."""
    here = os.getcwd()
    if folder and os.path.isdir(folder):
        os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def open_executor(workers: int | None = None, ray: str | None = None) -> LocalExecutor | RayExecutor:
    """A Ray executor when `ray` names a cluster (auto or HOST:PORT), else a local pool of `workers`."""
    return RayExecutor(ray) if ray else LocalExecutor(workers)


__all__ = ["JobFailed", "LocalExecutor", "RayExecutor", "open_executor", "working_in"]
