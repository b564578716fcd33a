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

`pool.stop(signal)` stops a pool: no job starts after it, and the running ones get the signal (a local
worker still running after `STOP_GRACE` seconds, or after a second stop, is killed). A local worker whose
parent process died stops its job the same way and ends.

`one_run_per_example()` keeps DSPy's own thread pool (under `dspy.Evaluate` and the optimizers) from running
an example a second time beside the first.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from deepresearch.programs.lm.secrets import redact
from deepresearch.retrievers.extras import require


class JobStopped(Exception):
    """A job that a stop ended in its worker. The worker raises it, not KeyboardInterrupt, so that the parent
    tells a job its stop ended from an interrupt of its own (which must end the parent's loop, not one job)."""


@dataclass
class JobFailed:
    """A job that raised, or whose process died; `error` is one line, secrets removed."""

    error: str


def _failed(err: BaseException) -> JobFailed:
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return JobFailed(redact(f"{type(err).__name__}: {first}" if first else type(err).__name__))


STOP_GRACE = 10.0  # seconds a stopped local worker has to end its job before it is killed
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_worker = {"running": False, "stopped": False}  # the state of this process when it is a local worker


def _worker_start(parent: int) -> None:
    """A local worker's start: its own process group, so a terminal's Ctrl-C reaches only the parent (which
    passes it on once), its stop signals, and a watch that ends it when the parent dies."""
    with contextlib.suppress(OSError):
        os.setpgrp()
    _worker_signals()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _worker_signals() -> None:
    # again after each job: a run installs its own handlers and leaves the defaults behind
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _on_stop)


def _on_stop(signum, frame) -> None:
    _worker["stopped"] = True  # a job handed over after the stop is not started
    if _worker["running"]:
        raise KeyboardInterrupt


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    if _worker["running"]:  # the job stops as on the parent's stop, keeping what it has
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while _worker["running"] and time.monotonic() < deadline:
            time.sleep(0.1)
    os._exit(1)


def _run_job(fn: Callable[[Any], Any], job: Any) -> Any:
    if _worker["stopped"]:
        raise JobStopped("stopped before it started")
    _worker["running"] = True
    try:
        return fn(job)
    except KeyboardInterrupt as err:
        raise JobStopped(str(err) or "stopped while it ran") from None
    finally:
        _worker["running"] = False
        _worker_signals()


class LocalExecutor:
    """`workers` processes of this machine (spawned: no thread or lock state is inherited).

    A job is handed to a worker only when one is free, so a stop leaves no job queued to start later.
    """

    kind = "local"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or min(2, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None
        self._stopped = False

    def __enter__(self) -> LocalExecutor:
        self._pool = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_start,
            initargs=(os.getpid(),),
        )
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            if exc[0] is not None:  # the caller failed: the running jobs stop (and keep what they have)
                self.stop()
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _processes(self) -> list:
        return list((getattr(self._pool, "_processes", None) or {}).values())  # no public list of its workers

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Starts no further job and sends `sig` to the workers; kills them after STOP_GRACE s, or at once
        when called again."""
        if self._stopped:
            self._kill()
            return
        self._stopped = True
        for process in self._processes():
            with contextlib.suppress(OSError):
                os.kill(process.pid, sig)
        timer = threading.Timer(STOP_GRACE, self._kill)
        timer.daemon = True
        timer.start()

    def _kill(self) -> None:
        for process in self._processes():
            with contextlib.suppress(OSError, ValueError):
                if process.is_alive():
                    os.kill(process.pid, signal.SIGKILL)

    def map_unordered(self, fn: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        assert self._pool is not None, "use the executor in a with block"
        pool = self._pool
        waiting = iter(enumerate(jobs))
        futures: dict[Future, int] = {}

        def hand_out() -> None:
            while not self._stopped and len(futures) < self.workers:
                index, job = next(waiting, (None, None))
                if index is None:
                    return
                try:
                    future = pool.submit(_run_job, fn, job)
                except Exception as err:  # the pool broke (a worker died): the job fails as its own would
                    future = Future()
                    future.set_exception(err)
                futures[future] = index

        hand_out()
        while futures:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for future in done:
                index = futures.pop(future)
                try:
                    result = future.result()
                except Exception as err:  # the job raised (JobStopped when stopped), or its process died
                    # (BrokenProcessPool); this process's own interrupt is no job's failure and goes on
                    result = _failed(err)
                yield index, result
            hand_out()


class RayExecutor:
    """Tasks on a Ray cluster: `address` is `auto` (the cluster this machine belongs to) or `HOST:PORT`.

    Each job is one Ray task asking for `cpus_per_job` CPUs; a task whose worker dies is run again up to
    `max_retries` times.
    """

    kind = "ray"

    def __init__(self, address: str = "auto", cpus_per_job: float = 1.0, max_retries: int = 3):
        self.ray = require("ray", "ray", "a Ray cluster (--ray)")
        check_ray_address(address)
        self.address, self.cpus_per_job, self.max_retries = address, cpus_per_job, max_retries
        self.workers = 0
        self._pending: list = []
        self._stops = 0

    def __enter__(self) -> RayExecutor:
        ray = self.ray
        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
        self.workers = int(ray.cluster_resources().get("CPU", 0) // self.cpus_per_job) or 1
        return self

    def __exit__(self, *exc) -> None:
        self.ray.shutdown()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Cancels the tasks: a running one gets a KeyboardInterrupt, a second stop ends its worker."""
        self._stops += 1
        for ref in list(self._pending):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=self._stops > 1)

    def map_unordered(self, fn: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        ray = self.ray
        task = ray.remote(num_cpus=self.cpus_per_job, max_retries=self.max_retries)(fn)
        refs = {task.remote(job): i for i, job in enumerate(jobs)}
        self._pending = pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            self._pending = pending
            for ref in done:
                try:
                    result = ray.get(ref)
                except Exception as err:  # the task raised, was cancelled, or failed past its retries
                    result = _failed(err)
                yield refs[ref], result


def _ray_host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a `--ray` HOST:PORT (or ray://HOST:PORT), None for auto or local.

    Raises:
        ValueError: for anything else, naming the forms it takes.
    """
    if address in ("auto", "local"):
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--ray {address!r} is no Ray cluster address; pass auto or the HOST:PORT of its head node")
    return host.strip("[]"), int(port)


def check_ray_address(address: str) -> None:
    """Checks a `--ray` address before any work: auto, local, or the HOST:PORT of a head node that answers
    (`ray.init` would retry an absent one for minutes).

    Raises:
        ValueError: one line naming the address and what to pass.
    """
    where = _ray_host_port(address)
    if where is None:
        return
    try:
        socket.create_connection(where, timeout=5).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ValueError(
            f"cannot reach the Ray cluster at --ray {address} ({reason}); start it (`ray start --head`) or pass the "
            f"HOST:PORT of its head node (or auto)"
        ) from None


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


@contextlib.contextmanager
def one_run_per_example() -> Iterator[None]:
    """While the block runs, DSPy's `ParallelExecutor` (under `dspy.Evaluate` and every optimizer's
    evaluations) runs each example once.

    By default it starts a second copy of each of the last three examples still running after 120 s and
    leaves the first copy running (stanfordnlp/dspy#9574, not configurable from `Evaluate` in DSPy 3.4). With a
    local model a research or gathering run often takes longer than that: the copies repeated the LM calls
    at the end of an evaluation, and those left behind went on calling the LM after it had returned, beside
    the next one, and failed at exit ("cannot schedule new futures after shutdown"). A timeout of 0 turns
    the copying off.
    """
    from dspy.utils.parallelizer import ParallelExecutor  # lazy: the commands importing this module start fast

    original = ParallelExecutor.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.timeout = 0

    ParallelExecutor.__init__ = init
    try:
        yield
    finally:
        ParallelExecutor.__init__ = original
