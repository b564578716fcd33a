"""Per-stage accounting of LM requests and tokens, and the output limit of every predictor call.

A run installs a UsageMeter as DSPy's usage tracker (`metered`); each stage module calls its predictor
through `call_predictor`, which names the stage in a context variable and caps the reply at the stage's
`max_tokens`. DSPy hands the tracker one usage entry per answered request (JSON-adapter fallbacks
included, cache hits not); `call_predictor` adds what the tracker never sees: requests that raised,
predictor calls whose first reply did not parse, and predictor calls that got no parseable reply. A
reply whose completion tokens reach the stage's limit was cut there (finish reason `length`); it is
counted and noted on the node that made the call. Tokens are counted per node too (and per stage within
it): a node's notes end with one `tokens:` line, so the trace shows what each node cost. One tracker for the whole run, rather than a
callback or a tracker per call, keeps the per-call overhead near zero.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError, LMError
from dspy.utils.usage_tracker import UsageTracker

from deepresearch.programs.artifacts import StageUsage
from deepresearch.programs.stages.spec import StageSpec

# Output tokens a stage may write are sized to what it produces (a plan of a few queries, one judgement per
# paper, up to five learnings, a report): its spec's `max_output_tokens`. They bound a runaway generation;
# a reply that reaches its limit is recorded as truncated. `output_limits` overrides them.

_stage: contextvars.ContextVar[str] = contextvars.ContextVar("deepresearch_stage", default="other")
_node: contextvars.ContextVar[str] = contextvars.ContextVar("deepresearch_node", default="root")
_limits: contextvars.ContextVar[Mapping[str, int] | None] = contextvars.ContextVar("deepresearch_limits", default=None)
_call: contextvars.ContextVar[_CallStats | None] = contextvars.ContextVar("deepresearch_call", default=None)
_reservation: contextvars.ContextVar[Reservation | None] = contextvars.ContextVar(
    "deepresearch_reservation", default=None
)
_resample: contextvars.ContextVar[int] = contextvars.ContextVar("deepresearch_resample", default=0)
# the scheduler's budget check for a stage call's further requests (`budget_check`); raises when spent
_budget: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("deepresearch_budget", default=None)
# the temperature a re-asked call is sampled at when its LM decodes greedily (temperature 0 or unset):
# warm enough to leave a runaway or malformed reply, cool enough for a small model to stay on task
RESAMPLE_TEMPERATURE = 0.7


@contextmanager
def _setting(var: contextvars.ContextVar[Any], value: Any) -> Iterator[None]:
    """`var` set to `value` for the code inside."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def budget_check(check: Callable[[], None]) -> AbstractContextManager[None]:
    """Makes `check` (which raises when the run's budget has no room for another LM request) guard every
    predictor call inside after the first: a stage call that asks several times (the verify stage's
    batches, a taxonomy's parts) is held to the budget request by request, not only when it starts."""
    return _setting(_budget, check)


@contextmanager
def _budgeted(meter: UsageMeter | None) -> Iterator[None]:
    """One predictor call's request, within the budget: the stage call's reservation for its first, a
    check and a reservation of its own for each later one."""
    check, reservation = _budget.get(), _reservation.get()
    if check is None or meter is None or (reservation is not None and not reservation.is_claimed):
        if reservation is not None:
            reservation.is_claimed = True
        yield
        return
    check()
    with meter.reserving():
        yield


def resampling(attempt: int) -> AbstractContextManager[None]:
    """Marks the calls inside as attempt `attempt` of a call whose earlier replies did not parse (0: the
    first); `call_predictor` then asks for a new sample instead of the cached or greedy reply."""
    return _setting(_resample, attempt)


class Reservation:
    """One LM request a scheduled stage call is about to send, counted against the budget until it is.

    The meter counts a request when DSPy reports its usage, inside the call; the reservation is released
    at that same moment (under the meter's lock), so no budget check ever sees a request twice, once
    reserved and once counted, nor misses it in between.
    """

    __slots__ = ("is_open", "is_claimed")

    def __init__(self):
        self.is_open = True
        self.is_claimed = False  # a predictor call of the stage call has taken it for its request


@dataclass
class _CallStats:
    """Requests answered within one predictor call, and how many reached the output limit."""

    max_tokens: int | None
    answered: int = 0
    truncated: int = 0


class UsageMeter(UsageTracker):
    """Counts LM requests and tokens per stage (and per model within a stage) for one run."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._calls: dict[str, int] = defaultdict(int)
        self._prompt: dict[str, int] = defaultdict(int)
        self._completion: dict[str, int] = defaultdict(int)
        self._failed: dict[str, int] = defaultdict(int)
        self._fallbacks: dict[str, int] = defaultdict(int)
        self._parse_failures: dict[str, int] = defaultdict(int)
        self._truncated: dict[str, int] = defaultdict(int)
        self._cached: dict[str, int] = defaultdict(int)
        self._seconds: dict[str, float] = defaultdict(float)
        self._notes: dict[str, list[str]] = defaultdict(list)
        self._by_model: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
        self._by_node: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
        self.parent: UsageTracker | None = None  # the tracker this meter was installed inside, if any
        self.reserved = 0  # requests of stage calls under way that the meter has not counted yet
        self.replies = 0  # predictor calls that returned a parsed reply (cache hits included)
        self.busy_s = 0.0  # seconds in which at least one predictor call was waiting on the LM
        self._in_flight = 0
        self._busy_from = 0.0

    @contextmanager
    def reserving(self) -> Iterator[None]:
        """Reserves one request for the stage call inside; the call's first counted request releases it."""
        reservation = Reservation()
        with self._lock:
            self.reserved += 1
        token = _reservation.set(reservation)
        try:
            yield
        finally:
            _reservation.reset(token)
            with self._lock:
                self._release(reservation)

    def _release(self, reservation: Reservation | None) -> None:
        if reservation is not None and reservation.is_open:  # caller holds the lock
            reservation.is_open = False
            self.reserved -= 1

    def __deepcopy__(self, memo):
        # dspy.Evaluate deep-copies the usage tracker into each worker thread; a copy would hold a copy of
        # the lock (which raises) and count nothing. Every thread shares this one, which is thread-safe.
        return self

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        if self.parent is not None:  # an enclosing meter or `dspy.track_usage` sees every call as it happens
            self.parent.add_usage(lm, usage_entry)
        stage = _stage.get()
        usage_entry = usage_entry or {}
        prompt = int(usage_entry.get("prompt_tokens") or 0)
        completion = int(usage_entry.get("completion_tokens") or 0)
        cached = cached_tokens(usage_entry)
        stats = _call.get()
        with self._lock:
            self._release(_reservation.get())
            super().add_usage(lm, usage_entry)
            self._calls[stage] += 1
            self._prompt[stage] += prompt
            self._completion[stage] += completion
            self._cached[stage] += cached
            tokens = self._by_model[stage][lm]
            tokens[0] += prompt
            tokens[1] += completion
            tokens[2] += cached
            calls = self._by_node[_node.get()][stage]
            calls[0] += 1
            calls[1] += prompt
            calls[2] += completion
            if stats is not None:
                stats.answered += 1
                if stats.max_tokens and completion >= stats.max_tokens:
                    stats.truncated += 1

    def record(
        self,
        stage: str,
        *,
        failed: int = 0,
        fallbacks: int = 0,
        parse_failures: int = 0,
        truncated: int = 0,
        note: str | None = None,
        seconds: float = 0.0,
    ) -> None:
        """Adds what the tracker does not see to `stage`'s counts, and a note to the current node."""
        with self._lock:
            if failed:
                self._release(_reservation.get())
            self._failed[stage] += failed
            self._fallbacks[stage] += fallbacks
            self._parse_failures[stage] += parse_failures
            self._truncated[stage] += truncated
            self._seconds[stage] += seconds
            if note:
                self._notes[_node.get()].append(note)

    def sending(self, now: float) -> None:
        """A predictor call goes to the LM at `now` (the event loop's clock)."""
        with self._lock:
            if not self._in_flight:
                self._busy_from = now
            self._in_flight += 1

    def received(self, now: float) -> None:
        """A predictor call came back (answered or not) at `now`."""
        with self._lock:
            self._in_flight -= 1
            if not self._in_flight:
                self.busy_s += now - self._busy_from

    def replied(self) -> None:
        """Counts a predictor call that returned a reply (from the server or the cache)."""
        with self._lock:
            self.replies += 1

    @property
    def total_calls(self) -> int:
        """Requests sent: answered ones and ones that raised."""
        return sum(self._calls.values()) + sum(self._failed.values())

    @property
    def total_tokens(self) -> int:
        return sum(self._prompt.values()) + sum(self._completion.values())

    def notes(self, node_id: str) -> tuple[str, ...]:
        """What went wrong in the node's LM calls, then (when it made any) a `tokens:` line of what they cost."""
        with self._lock:
            notes = tuple(self._notes.get(node_id, ()))
            stages = self._by_node.get(node_id)
        if not stages:
            return notes
        prompt, completion = sum(v[1] for v in stages.values()), sum(v[2] for v in stages.values())
        parts = ", ".join(f"{s} {c} calls {p}+{o}" for s, (c, p, o) in stages.items())
        return (*notes, f"tokens: {prompt} prompt + {completion} completion ({parts})")

    def tokens_by_model(self) -> dict[str, dict[str, tuple[int, int, int]]]:
        """stage -> model -> (prompt tokens, completion tokens, cached prompt tokens)."""
        with self._lock:
            return {s: {m: (p, c, k) for m, (p, c, k) in models.items()} for s, models in self._by_model.items()}

    def snapshot(self) -> dict[str, StageUsage]:
        with self._lock:
            counters = (
                self._calls,
                self._prompt,
                self._completion,
                self._failed,
                self._fallbacks,
                self._parse_failures,
                self._truncated,
            )
            stages = sorted({s for c in counters for s, v in c.items() if v})
            return {
                s: StageUsage(
                    calls=self._calls[s],
                    prompt_tokens=self._prompt[s],
                    completion_tokens=self._completion[s],
                    failed=self._failed[s],
                    fallbacks=self._fallbacks[s],
                    parse_failures=self._parse_failures[s],
                    truncated=self._truncated[s],
                    cached_tokens=self._cached[s],
                    seconds=round(self._seconds[s], 4),
                )
                for s in stages
            }


def cached_tokens(usage_entry: Mapping[str, Any]) -> int:
    """Prompt tokens a reply's usage says the server read from its prompt cache (DSPy puts the provider's
    count under prompt_tokens_details.cached_tokens; a LiteLLM usage may hold an object there)."""
    details = usage_entry.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, Mapping) else getattr(details, "cached_tokens", None)
    return int(value or 0)


@contextmanager
def metered(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Context manager that makes `meter` DSPy's usage tracker for the code inside (a run)."""
    parent = meter.parent
    enclosing = dspy.settings.usage_tracker
    meter.parent = enclosing if enclosing is not meter else parent
    try:
        with dspy.context(usage_tracker=meter):
            yield meter
    finally:
        meter.parent = parent


def output_limits(limits: Mapping[str, int] | None = None, *, every: int | None = None) -> AbstractContextManager[None]:
    """Overrides the output-token limits of stages for the code inside.

    Args:
        limits: Stage name -> max tokens.
        every: One limit for every stage (`--max-output-tokens`); `limits` still wins for its stages.
    """
    for name, value in {**(limits or {}), **({"every stage": every} if every is not None else {})}.items():
        if value is not None and value < 1:
            raise ValueError(f"max output tokens of {name} must be >= 1, got {value}")
    return _setting(_limits, {**({"*": every} if every is not None else {}), **(limits or {})})


def max_output_tokens(stage: StageSpec) -> int:
    """The output-token limit of `stage` in the current context: an `output_limits` override, else its own."""
    table = _limits.get() or {}
    return table.get(stage.name, table.get("*", stage.max_output_tokens))


def set_node(node_id: str) -> None:
    """Names the node the current task works for; notes of its LM calls are kept under it."""
    _node.set(node_id)


def _is_reasoning_model(predictor: dspy.Module) -> bool:
    """OpenAI's reasoning models need a large output allowance of their own (DSPy enforces >= 16000)."""
    from dspy.clients.lm import _is_openai_reasoning_model

    lm = getattr(predictor, "lm", None) or dspy.settings.lm
    return bool(lm is not None and _is_openai_reasoning_model(getattr(lm, "model", "") or ""))


def _new_sample(predictor: dspy.Module, attempt: int) -> dict[str, Any]:
    """Call settings that draw a different reply than the last attempt: a rollout id (a new cache key) and,
    for an LM decoding greedily, a sampling temperature. Reasoning models keep their fixed temperature."""
    lm = getattr(predictor, "lm", None) or dspy.settings.lm
    settings: dict[str, Any] = {"rollout_id": attempt}
    if not _is_reasoning_model(predictor) and not (getattr(lm, "kwargs", {}) or {}).get("temperature"):
        settings["temperature"] = RESAMPLE_TEMPERATURE
    return settings


async def call_predictor(spec: StageSpec, predictor: dspy.Module, **inputs) -> dspy.Prediction:
    """Calls `predictor` asynchronously under the output limit of the stage `spec`, attributing its requests
    to that stage.

    Raises what the predictor raises, after counting it: an LM error as a failed request, an
    AdapterParseError as a parse failure (both noted on the current node).
    """
    stage = spec.name
    limit = None if _is_reasoning_model(predictor) else max_output_tokens(spec)
    stats = _CallStats(max_tokens=limit)
    stage_token, call_token = _stage.set(stage), _call.set(stats)
    started = time.monotonic()
    meter = dspy.settings.usage_tracker if isinstance(dspy.settings.usage_tracker, UsageMeter) else None
    try:
        if limit is not None:
            inputs["config"] = {**inputs.get("config", {}), "max_tokens": limit}
        if attempt := _resample.get():
            inputs["config"] = {**inputs.get("config", {}), **_new_sample(predictor, attempt)}
            if meter is not None:
                meter.record(
                    stage,
                    note=f"{stage}: asked again for a new sample (attempt {attempt + 1}) "
                    "after a reply that did not parse",
                )
        clock = asyncio.get_running_loop().time
        with _budgeted(meter):
            if meter is not None:
                meter.sending(clock())
            try:
                out = await predictor.acall(**inputs)
            finally:
                if meter is not None:
                    meter.received(clock())
        if meter is not None:
            meter.replied()
        return out
    except AdapterParseError:
        if meter is not None:
            meter.record(
                stage,
                parse_failures=1,
                note=f"{stage}: no reply parsed into the expected fields ({stats.answered} tried)",
            )
        raise
    except LMError as err:
        if meter is not None:
            meter.record(stage, failed=1, note=f"{stage}: {type(err).__name__}")
        raise
    except (asyncio.CancelledError, TimeoutError) as err:
        # our own timeout, the deadline or an interrupt cancelled a request that was sent: it counts
        if meter is not None and not stats.answered:
            meter.record(
                stage,
                failed=1,
                note=f"{stage}: no reply before the request was cancelled "
                f"({'timeout' if isinstance(err, TimeoutError) else 'timeout, deadline or interrupt'})",
            )
        raise
    finally:
        _stage.reset(stage_token)
        _call.reset(call_token)
        if meter is not None:
            meter.record(stage, seconds=time.monotonic() - started)
        if meter is not None and stats.answered:
            if stats.truncated:
                meter.record(
                    stage,
                    truncated=stats.truncated,
                    note=f"{stage}: reply cut at max_tokens={limit} (finish reason length)",
                )
            if stats.answered > 1:  # the text format did not parse; DSPy asked again in JSON
                meter.record(stage, fallbacks=1, note=f"{stage}: first reply did not parse; asked again in JSON")
