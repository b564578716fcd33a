"""One asyncio pool per run: node tasks, global caps on LM calls and searches, rate limits, budgets.

Every node of a research tree is a task in the run's `TaskPool`; a child is submitted by its parent
as soon as the parent's own research is done, so no level waits for another (`schedule="async"`).
The `level` and `sequential` schedules exist as baselines, as in ParallelResearch: `level` holds a level's nodes
until the whole level above has finished; `sequential` runs one node at a time, depth first.

LM calls go through `Scheduler.call`, searches through `Scheduler.search`. Each takes a slot of a
global semaphore and waits for its provider's rate limit. LMs built by
`deepresearch.programs.lm.models.make_lm` for a run leave retries to us (DSPy's own are invisible to the trace): a
transient error (rate limit, timeout, server or transport error) is retried at most `lm_retries`
times, after the server's Retry-After (capped at `retry_after_cap_s`) or exponential backoff, never
past the deadline; a rate limit pauses the whole provider (every call to it waits). Timeouts of our
own (`lm_timeout_s`, `search_timeout_s`) are retried the same way. A reply that does not parse into
the stage's fields (a small model's runaway or malformed JSON) is asked again `parse_retries` times as
a new sample (`deepresearch.programs.lm.usage.resampling`), under the same caps and budgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.lm.models import lm_concurrency, server_gate
from deepresearch.programs.lm.usage import UsageMeter, budget_check, resampling
from deepresearch.retrievers.engines.client import RateLimiter
from deepresearch.retrievers.types import Hit, Retriever, search_async

logger = logging.getLogger(__name__)

RETRYABLE_SEARCH_ERRORS = (asyncio.TimeoutError, TimeoutError, ConnectionError)


class BudgetExceeded(RuntimeError):
    """Raised before an LM call that the run's call or token budget does not allow."""


class TaskPool:
    """The set of running tasks of one run: spawn, wait until none is left, cancel all."""

    def __init__(self):
        self._tasks: set[asyncio.Task] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        self._idle.clear()
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a pool task ended with an error", exc_info=task.exception())
        if not self._tasks:
            self._idle.set()

    def __len__(self) -> int:
        return len(self._tasks)

    async def join(self) -> None:
        """Returns when no task is left, including tasks spawned while waiting."""
        while self._tasks:
            await self._idle.wait()

    async def cancel(self) -> int:
        """Cancels every task and waits until they have all ended; returns how many were cancelled."""
        cancelled = 0
        while self._tasks:
            tasks = list(self._tasks)
            for t in tasks:
                cancelled += t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return cancelled


def lm_of(module: dspy.Module) -> Any:
    """The LM a stage would call (its own, else the one in `dspy.settings`), or None when it calls none."""
    predictors = module.predictors()
    return (predictors[0].lm or dspy.settings.lm) if predictors else None


def provider_of(module: dspy.Module) -> str | None:
    """The provider (`openai`, `anthropic`...) of the LM a stage would call, or None when it calls none."""
    lm = lm_of(module)
    model = getattr(lm, "model", None) or ""
    return model.split("/", 1)[0] if model else None


def model_cost(model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float | None:
    """US dollars by LiteLLM's `cost_per_token` over its local price map, or None for a model it does not price.
    Of the prompt tokens, `cached_tokens` (read from the provider's prompt cache) cost the cache-read price.
    A model whose provider prefix LiteLLM does not know (`fake/scripted`, a custom engine's name) costs None
    without asking LiteLLM, which would print its "Provider List" banner to stdout first."""
    import litellm

    prefix = model.split("/", 1)[0]
    if "/" in model and prefix not in litellm.provider_list and model not in litellm.model_cost:
        return None
    try:
        prompt, completion = litellm.cost_per_token(
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cache_read_input_tokens=min(cached_tokens, prompt_tokens),
        )
    except (litellm.exceptions.ModelNotMappedError, litellm.exceptions.BadRequestError):  # unpriced; unknown provider
        return None
    return prompt + completion


class CostMeter(UsageMeter):
    """A UsageMeter that prices each stage's tokens per model from LiteLLM's local price map."""

    def costs(self) -> dict[str, float | None]:
        """Dollars per stage; None for a stage that used a model without a known price."""
        out: dict[str, float | None] = {}
        for stage, models in sorted(self.tokens_by_model().items()):
            prices = [model_cost(m, p, c, cached) for m, (p, c, cached) in models.items()]
            known = [x for x in prices if x is not None]
            out[stage] = None if len(known) < len(prices) else round(sum(known), 8)
        return out


Factory = Callable[[Callable[[], None]], Awaitable[Any]]


class GptrSchedule:
    """GPT-Researcher's deep-research schedule, as a baseline (ParallelResearch's `gptr_style`).

    Each node's children form a family. A family's members run two at a time; the family of a node
    starts only when the node and all its siblings have finished their research (the level's barrier)
    and the subtrees of its earlier siblings have finished (the sequential recursion).
    """

    WIDTH = 2  # the framework's semaphore per deep-research call

    def __init__(self):
        self._families: dict[str | None, list[str]] = defaultdict(list)  # parent -> children, in order
        self._waiting: dict[str | None, list[tuple[Callable[[asyncio.Semaphore], None], asyncio.Future]]] = defaultdict(
            list
        )  # parent -> (start, future) of children held until their family may start
        self._gates: dict[str | None, asyncio.Semaphore] = {}
        self._started: set[str | None] = {None}
        self._parent: dict[str, str | None] = {}
        self._released: set[str] = set()
        self._ended: set[str] = set()
        self._done: set[str] = set()  # subtrees that have finished

    def add(
        self, key: str, parent: str | None, start: Callable[[asyncio.Semaphore], None], fut: asyncio.Future
    ) -> None:
        """Registers node `key`; `start(gate)` runs it once its family may start, `fut` is its result."""
        self._parent[key] = parent
        self._families[parent].append(key)
        gate = self._gates.setdefault(parent, asyncio.Semaphore(self.WIDTH))
        if parent in self._started:
            start(gate)
        else:
            self._waiting[parent].append((start, fut))
            self._pump()

    def released(self, key: str) -> None:
        self._released.add(key)
        self._pump()

    def ended(self, key: str) -> None:
        self._ended.add(key)
        node: str | None = key
        while (
            node is not None
            and node not in self._done
            and node in self._ended
            and all(c in self._done for c in self._families.get(node, ()))
        ):
            self._done.add(node)
            node = self._parent[node]
        self._pump()

    def cancel(self) -> None:
        """Cancels the nodes still held; they will never start."""
        for held in self._waiting.values():
            for _, fut in held:
                fut.cancel()
        self._waiting.clear()

    def _may_start(self, node: str) -> bool:
        siblings = self._families[self._parent[node]]
        earlier = siblings[: siblings.index(node)]
        return all(s in self._released for s in siblings) and all(s in self._done for s in earlier)

    def _pump(self) -> None:
        # the roots' parent, None, is started from the beginning
        for node in [n for n, starts in self._waiting.items() if starts and n is not None and n not in self._started]:
            if self._may_start(node):
                self._started.add(node)
                gate = self._gates[node]
                for start, _ in self._waiting.pop(node):
                    start(gate)


class Scheduler:
    """The per-run scheduler: pool, node slots, LM and search caps, rate limits, retries and budgets.

    Args:
        config: Caps, timeouts, retries, budgets and the schedule.
        meter: The run's meter; the call and token budgets are read from it.
    """

    def __init__(self, config: ResearchConfig, meter: UsageMeter):
        self.config = config
        self.meter = meter
        sequential = config.schedule == "sequential"
        self.pool = TaskPool()
        self.node_slots = asyncio.Semaphore(1 if sequential else config.max_concurrency)
        self.lm_cap = 1 if sequential else lm_concurrency(dspy.settings.lm, config.lm_concurrency)
        self.lm_slots = asyncio.Semaphore(self.lm_cap)
        # unless a cap is set for the run, each request also keeps to its server's slots, which every run
        # and process shares (a stage's LM may be on another server than the run's)
        self._share_slots = not sequential and config.lm_concurrency is None
        self._gates: dict[int, Any] = {}  # id of an LM -> its server's slots, read once a run
        self.search_slots = asyncio.Semaphore(1 if sequential else config.search_concurrency)
        rates = dict(config.rate_limits)
        self._limiters: dict[str, RateLimiter] = defaultdict(lambda: RateLimiter(0.0))
        self._limiters.update({p: RateLimiter(1.0 / r if r else 0.0) for p, r in rates.items()})
        self._outstanding: dict[int, int] = defaultdict(int)
        self._held: dict[int, list[tuple[Factory, asyncio.Future]]] = defaultdict(list)
        self._loop = asyncio.get_running_loop()  # its clock: real time, or a test's virtual time
        self.started = self._loop.time()
        self.retries = {"lm": 0, "parse": 0, "search": 0}
        self._gptr = GptrSchedule()

    # ---- nodes -------------------------------------------------------------------------------------
    async def submit(self, level: int, factory: Factory, *, key: str, parent: str | None = None) -> asyncio.Future:
        """Schedules a node at tree level `level` (roots are 1) and returns a future of its result.

        `factory(release)` builds the node's coroutine; the node calls `release()` once its own research
        is done (the `level` and `gptr` schedules wait for that); ending also releases. `key` names the
        node and `parent` the node that submits it (None at the root); only `gptr` needs them.
        """
        if self.config.schedule == "sequential":
            # a task of its own, as in the other schedules: the node's context (the node its LM calls are
            # metered for) must not leak into its parent's, which goes on after it
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(await asyncio.ensure_future(factory(lambda: None)))
            return fut
        fut = asyncio.get_running_loop().create_future()
        if self.config.schedule == "gptr":
            self._gptr.add(key, parent, lambda gate: self._start(level, factory, fut, key, gate), fut)
        elif self.config.schedule == "level" and self._outstanding[level - 1] > 0:
            self._held[level].append((factory, fut))
        else:
            self._start(level, factory, fut)
        return fut

    def _start(
        self,
        level: int,
        factory: Factory,
        fut: asyncio.Future,
        key: str | None = None,
        gate: asyncio.Semaphore | None = None,
    ) -> None:
        self._outstanding[level] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._outstanding[level] -= 1
            if self._outstanding[level] == 0 and self._held.get(level + 1):
                waiting, self._held[level + 1] = self._held[level + 1], []
                for f, child_fut in waiting:
                    self._start(level + 1, f, child_fut)
            if key is not None and self.config.schedule == "gptr":
                self._gptr.released(key)

        async def run() -> None:
            try:
                async with gate if gate is not None else contextlib.nullcontext():
                    result = await factory(release)
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except BaseException as err:  # node coroutines record their own failures; this is a bug
                fut.set_exception(err)
                raise
            else:
                fut.set_result(result)
            finally:
                release()
                if key is not None and self.config.schedule == "gptr":
                    self._gptr.ended(key)

        self.pool.spawn(run())

    async def cancel(self) -> int:
        self._gptr.cancel()
        for level in list(self._held):
            for _, fut in self._held.pop(level):
                fut.cancel()
        return await self.pool.cancel()

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None without one."""
        if self.config.deadline_s is None:
            return None
        return max(0.0, self.config.deadline_s - self.elapsed())

    def elapsed(self) -> float:
        return self._loop.time() - self.started

    # ---- budgets -----------------------------------------------------------------------------------
    def exhausted(self, reserve: int = 1) -> str | None:
        """Why research must stop now (call or token budget spent), or None.

        `reserve` LM calls are kept for the writer, so a run within budget can still write its report.
        """
        c = self.config
        if c.max_lm_calls is not None and self.meter.total_calls + self.meter.reserved >= c.max_lm_calls - reserve:
            return f"LM call budget of {c.max_lm_calls} reached"
        if c.max_tokens is not None and self.meter.total_tokens >= c.max_tokens:
            return f"token budget of {c.max_tokens} reached"
        return None

    def _check(self, reserve: int) -> None:
        """Raises BudgetExceeded when the call or token budget has no room for another request."""
        reason = self.exhausted(reserve)
        if reason:
            raise BudgetExceeded(reason)

    # ---- calls -------------------------------------------------------------------------------------
    async def call(self, module: dspy.Module, *, reserve: int = 1, **inputs) -> dspy.Prediction:
        """Calls a stage module under the LM cap, its provider's rate limit and the run's budgets.

        Raises:
            BudgetExceeded: when the call or token budget leaves no room for this call.
        """
        return await self.guard(module, lambda: module.acall(**inputs), reserve=reserve)

    async def guard(self, module: dspy.Module, make: Callable[[], Awaitable[Any]], *, reserve: int = 1) -> Any:
        """Awaits `make()`, an LM call of `module`'s predictors, under the LM cap, its provider's rate limit,
        the timeout, retries and the run's budgets (`call` does this for a stage module's `acall`).

        Raises:
            BudgetExceeded: when the call or token budget leaves no room for this call.
        """
        provider = provider_of(module)
        if provider is None:  # an offline stage: no LM, no cap, no budget
            return await make()
        limiter = self._limiters[provider]
        attempt = resamples = 0
        while True:
            await limiter.acquire()
            try:
                async with self.lm_slots, self._server_turn(module):
                    self._check(reserve)  # checked once a slot is held: calls in flight count
                    with self.meter.reserving(), resampling(resamples), budget_check(lambda: self._check(reserve)):
                        return await asyncio.wait_for(make(), self.config.lm_timeout_s)  # None: no limit
            except AdapterParseError:
                if resamples >= self.config.parse_retries:
                    raise
                resamples += 1
                self.retries["parse"] += 1
                logger.info("LM reply to %s did not parse; asking again for a new sample", provider)
                continue
            except Exception as err:
                if (
                    not (dspy.is_retryable_lm_error(err) or isinstance(err, asyncio.TimeoutError))
                    or attempt >= self.config.lm_retries
                ):
                    raise
                hint = getattr(err, "retry_after", None)
                wait = min(float(hint), self.config.retry_after_cap_s) if hint else self.config.backoff_s * 2**attempt
                left = self.remaining()
                if left is not None and wait >= left:  # a retry after the deadline would hold the run past it
                    raise
                if isinstance(err, dspy.LMRateLimitError):
                    limiter.pause(wait)  # every call to this provider waits, not only this one
                logger.warning("LM call to %s: %s; retrying in %.2fs", provider, type(err).__name__, wait)
                self.retries["lm"] += 1
                attempt += 1
                await asyncio.sleep(0 if isinstance(err, dspy.LMRateLimitError) else wait)

    @contextlib.asynccontextmanager
    async def _server_turn(self, module: dspy.Module) -> AsyncIterator[None]:
        """A slot of the server `module` calls, shared with every other run (`server_gate`); waiting for it is
        not part of the request's timeout."""
        gate = None
        if self._share_slots:
            lm = lm_of(module)
            if id(lm) not in self._gates:  # a first request's lookup asks the server; later ones must not
                self._gates[id(lm)] = server_gate(lm)
            gate = self._gates[id(lm)]
        if gate is None:
            yield
            return
        while (slot := gate.take()) is None:  # other runs' requests hold every slot, on other loops or processes
            await asyncio.sleep(0.01)
        try:
            yield
        finally:
            slot.release()

    async def search(self, retriever: Retriever, query: str, k: int, **filters: Any) -> list[Hit]:
        """One search under the search cap, with a timeout and retries on timeouts and lost connections.

        `filters` (offset, exclude, before...) go to the retriever as they are.
        """
        attempt = 0
        while True:
            try:
                async with self.search_slots:
                    coro = search_async(retriever, query, k, **filters)
                    return await asyncio.wait_for(coro, self.config.search_timeout_s)  # None: no limit
            except RETRYABLE_SEARCH_ERRORS as err:
                if attempt >= self.config.search_retries:
                    raise
                wait = self.config.backoff_s * 2**attempt
                logger.warning("search %r: %s; retrying in %.2fs", query, type(err).__name__, wait)
                self.retries["search"] += 1
                attempt += 1
                await asyncio.sleep(wait)
