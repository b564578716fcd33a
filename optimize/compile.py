"""Running a DSPy optimizer by name under a budget, with a before/after table on the dev split."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dspy

from deepresearch.optimize.metrics import MetricSpec, as_gepa_metric, as_metric
from deepresearch.optimize.names import OPTIMIZERS
from deepresearch.programs.lm.replies import LMReplies, ReplyCounts
from deepresearch.programs.lm.usage import UsageMeter, metered
from deepresearch.programs.runtime.executor import one_run_per_example
from deepresearch.programs.runtime.stage import Shared
from deepresearch.programs.stages.choice import choose_twins
from deepresearch.retrievers.extras import install_hint

if TYPE_CHECKING:
    from deepresearch.optimize.resume import RunFolder

logger = logging.getLogger(__name__)

GATED = ("bootstrap-rs", "miprov2")  # whose extra candidates and bootstrapping would pass the budget
TEACHABLE = ("bootstrap-rs", "miprov2")  # whose compile takes a teacher program (GEPA's refuses one, SIMBA has none)


class LMCallBudgetSpent(RuntimeError):
    """A request the run's LM-call budget (`--max-lm-calls`) has no room for; it was not sent."""


class CallCap:
    """The LM requests the optimizer may still send, all LMs together (its task calls, and its own: MIPROv2's
    proposer, GEPA's reflection, the judge). `take()` charges one and raises `LMCallBudgetSpent` past the cap."""

    def __init__(self, limit: int):
        self.limit = max(0, limit)
        self.used = 0
        self._lock = threading.Lock()
        self._told = False

    @property
    def spent(self) -> bool:
        return self.used >= self.limit

    def take(self) -> None:
        with self._lock:
            if self.used >= self.limit:
                if not self._told:
                    self._told = True
                    logger.warning(
                        "LM-call budget spent (%d requests for the optimizer); its further calls are not sent",
                        self.limit,
                    )
                raise LMCallBudgetSpent(f"the LM-call budget of {self.limit} optimizer requests is spent")
            self.used += 1


class CappedCache:
    """DSPy's cache while the optimizer runs under a `CallCap`: every request the cache cannot answer (one
    about to be sent) is charged first, so no request past the cap leaves. DSPy reads `dspy.cache` at each
    call, from every thread, so this sees every LM call of the optimizer; the cache it wraps still answers."""

    def __init__(self, inner, cap: CallCap):
        self.inner, self.cap = inner, cap

    def get(self, request, ignored_args_for_cache_key=None):
        answer = self.inner.get(request, ignored_args_for_cache_key)
        if answer is None:
            self.cap.take()
        return answer

    def __getattr__(self, name):
        return getattr(self.inner, name)


@contextlib.contextmanager
def capped(cap: CallCap | None):
    """Installs `CappedCache` around DSPy's cache for the block (nothing without a cap)."""
    if cap is None:
        yield
        return
    inner = dspy.cache
    charge = getattr(inner, "charge", False)  # a resumed run's journal charges the answers it replays
    with dspy._cache_lock:
        dspy.cache = CappedCache(inner, cap)
    if charge is not False:
        inner.charge = cap.take
    try:
        yield
    finally:
        with dspy._cache_lock:
            dspy.cache = inner
        if charge is not False:
            inner.charge = charge


@dataclass
class Gate:
    """When the examples an optimizer runs answer without an LM call: its metric budget spent (for the
    optimizers that pass it on their own), or the run's LM-call budget."""

    progress: Progress | None = None
    cap: CallCap | None = None

    def is_spent(self) -> bool:
        return (self.progress is not None and self.progress.is_spent()) or (self.cap is not None and self.cap.spent)


def frozen_like(teacher: dspy.Module, student: dspy.Module) -> dspy.Module:
    """`teacher` with the modules hidden from optimizers that are hidden in `student` (`targets.freeze`), so
    that both show an optimizer the same predictors."""
    frozen = {name for name, m in student.named_sub_modules() if m is not student and getattr(m, "_compiled", False)}
    for name, m in teacher.named_sub_modules():
        if name in frozen:
            m._compiled = True
    return teacher


class NoModelAnswer(RuntimeError):
    """No example of the dev evaluation before tuning got an answer from the model: every LM call it made
    failed, or the program failed on every example. Nothing was tuned; the message says why in one line."""


@dataclass(frozen=True)
class WatchCounts:
    """What a `DevWatch` saw, as plain data (a worker's evaluation sends it back: optimize/remote.py)."""

    examples: int = 0
    failures: tuple[str, ...] = ()
    replies: ReplyCounts = ReplyCounts()


class DevWatch:
    """The program's runs on dev examples as `Guarded` saw them: the LM calls they made (`LMReplies`: replied
    or failed, and why) and the examples the program failed on (the reason of each)."""

    def __init__(self):
        self.replies = LMReplies()
        self._lock = threading.Lock()
        self._examples = 0
        self._failures: list[str] = []

    def ran(self, failure: str | None = None) -> None:
        """Counts one example run, and the reason when the program failed on it."""
        with self._lock:
            self._examples += 1
            if failure is not None:
                self._failures.append(failure)

    def add(self, counts: WatchCounts) -> None:
        """Adds what another watch saw (a worker's)."""
        with self._lock:
            self._examples += counts.examples
            self._failures.extend(counts.failures)
        self.replies.add(counts.replies)

    def counts(self) -> WatchCounts:
        with self._lock:
            return WatchCounts(self._examples, tuple(self._failures), self.replies.counts())

    def no_answer(self) -> str | None:
        """Why no example got an answer from the model, when none did; None when one did, or when the
        program made no LM call and failed on no example (an offline program)."""
        seen = self.counts()
        replies = seen.replies
        if not seen.examples or replies.answered:
            return None
        examples = f"{seen.examples} example{'s' if seen.examples > 1 else ''}"
        if replies.failed:
            calls = f"{replies.failed} LM call{'s' if replies.failed > 1 else ''}"
            return f"{replies.cause()} ({examples}; {calls} failed, none answered)"
        if len(seen.failures) == seen.examples:
            return f"the program failed on every example ({examples}; first: {seen.failures[0]})"
        return None


class Guarded(dspy.Module):
    """Runs `program`; an example it fails on logs one line (a short id of its inputs and the reason) and scores
    as a failure, so no optimizer or evaluator logs the example itself (ten abstracts, several KB an error).
    With a `watch`, each run is counted there with the LM calls it made."""

    def __init__(self, program: dspy.Module, progress: Progress | Gate | None = None, watch: DevWatch | None = None):
        super().__init__()
        self.program = program
        # when its budget is spent, examples score 0 without running the program; one counter for every copy
        self._progress = Shared(progress)
        self._watch = Shared(watch)

    def _is_spent(self) -> bool:
        return self._progress.obj is not None and self._progress.obj.is_spent()

    def _watching(self):
        watch = self._watch.obj
        return watch.replies.watching() if watch is not None else contextlib.nullcontext()

    def _ran(self, inputs: dict, err: BaseException | None = None) -> dspy.Prediction | None:
        if self._watch.obj is not None:
            self._watch.obj.ran(None if err is None else reason_of(err))
        return None if err is None else failed(inputs, err)

    def forward(self, **inputs):
        if self._is_spent():
            return dspy.Prediction(failed=True, skipped=True)
        with self._watching():
            try:
                out = self.program(**inputs)
            except Exception as err:
                return self._ran(inputs, err)
        self._ran(inputs)
        return out

    async def aforward(self, **inputs):
        if self._is_spent():
            return dspy.Prediction(failed=True, skipped=True)
        with self._watching():
            try:
                out = await self.program.acall(**inputs)
            except Exception as err:
                return self._ran(inputs, err)
        self._ran(inputs)
        return out


def example_id(inputs: dict) -> str:
    """A short, stable id of an example's inputs, with the start of its question (or first text input)."""
    digest = hashlib.sha1(repr(sorted((k, repr(v)) for k, v in inputs.items())).encode()).hexdigest()[:8]
    text = next((v for k, v in inputs.items() if k in ("question", "subquery") and isinstance(v, str)), "")
    return f"{digest} ({text[:50]!r})" if text else digest


def reason_of(err: BaseException) -> str:
    """The exception's type and the first line of its message (at most 200 characters)."""
    reason = (str(err).strip().splitlines() or [""])[0][:200]
    return f"{type(err).__name__}: {reason}" if reason else type(err).__name__


def failed(inputs: dict, err: BaseException) -> dspy.Prediction:
    logger.warning("example %s failed: %s", example_id(inputs), reason_of(err))
    return dspy.Prediction(failed=True)


def guarded_metric(spec: MetricSpec):
    """`as_metric(spec)` scoring a failed example (a `Guarded` failure) 0."""
    metric = as_metric(spec)

    def score(example, pred, trace=None) -> float:
        return 0.0 if pred is None or pred.get("failed", False) else metric(example, pred, trace)

    score.__name__ = metric.__name__
    return score


def guarded_gepa_metric(spec: MetricSpec):
    metric = as_gepa_metric(spec)

    def score(gold, pred, trace=None, pred_name=None, pred_trace=None):
        if pred is None or pred.get("failed", False):
            return dspy.Prediction(score=0.0, feedback="the program failed on this example")
        return metric(gold, pred, trace, pred_name, pred_trace)

    score.__name__ = metric.__name__
    return score


@dataclass
class Progress:
    """Counts the optimizer's metric calls and keeps the best mean over `window` consecutive calls (a candidate
    program scored on the training set, as BootstrapFewShotWithRandomSearch and MIPROv2's full evaluations do);
    `report(line)` gets a progress line after each call."""

    budget: int
    window: int
    report: Callable[[str], None] | None = None
    calls: int = 0
    best: float | None = None
    _scores: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _told: bool = False

    def is_spent(self) -> bool:
        """Whether the optimizer has made `budget` metric calls (each one ran the program once)."""
        with self._lock:
            if self.calls >= self.budget and not self._told:
                self._told = True
                logger.warning(
                    "metric budget of %d calls spent; the optimizer's further candidates score 0 without an LM call",
                    self.budget,
                )
            return self.calls >= self.budget

    def wrap(self, metric):
        def score(*args, **kwargs):
            value = metric(*args, **kwargs)
            pred = args[1] if len(args) > 1 else kwargs.get("pred")
            if not (isinstance(pred, dspy.Prediction) and pred.get("skipped", False)):
                self.add(float(value.score if isinstance(value, dspy.Prediction) else value))
            return value

        score.__name__ = getattr(metric, "__name__", "metric")
        return score

    def add(self, value: float) -> None:
        with self._lock:
            self.calls += 1
            self._scores.append(value)
            if len(self._scores) == self.window:
                mean = sum(self._scores) / self.window
                self.best = mean if self.best is None else max(self.best, mean)
                self._scores = []
            line = self.line()
        if self.report is not None:
            self.report(line)

    def line(self) -> str:
        best = "–" if self.best is None else f"{self.best:.3f}"
        return f"metric calls {self.calls}/{self.budget} · best training score so far {best}"


def paired_bootstrap(
    before: list[float] | tuple[float, ...],
    after: list[float] | tuple[float, ...],
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile 95% interval of mean(after) - mean(before) over resamples of the paired examples."""
    import numpy as np

    if len(before) != len(after) or not before:
        raise ValueError(f"paired scores must be non-empty and of one length, got {len(before)} and {len(after)}")
    diff = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


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
    before_scores: tuple[float, ...] = ()  # per dev example, in the dev split's order
    after_scores: tuple[float, ...] = ()
    metric_calls: int = 0  # made by the optimizer (the dev evaluations not counted)
    choice_scores: dict[str, float] | None = None  # training scores of the per-stage choice (`choose`), when made

    def interval(self) -> tuple[float, float] | None:
        """The paired bootstrap 95% interval of the dev change, when per-example scores were kept."""
        return paired_bootstrap(self.before_scores, self.after_scores) if self.before_scores else None

    def table(self) -> str:
        ci = self.interval()
        change = f"{self.after - self.before:+.4f}" + (f" (95% CI {ci[0]:+.4f} to {ci[1]:+.4f})" if ci else "")
        return (
            "| program | dev " + self.metric + " |\n|---|---|\n"
            f"| before | {self.before:.4f} |\n| after ({self.optimizer}) | {self.after:.4f} |\n"
            f"| change | {change} |"
        )


# (program, devset, watch) -> (the metric of each example in devset's order, LM calls made by role); the runs
# are counted in the watch (`DevWatch`) when one is given
DevEvaluator = Callable[..., tuple[list[float], dict[str, int]]]


def evaluate_scores(
    program: dspy.Module,
    devset: list[dspy.Example],
    spec: MetricSpec,
    num_threads: int = 4,
    show_progress: bool = False,
    on_score: Callable[[int, float], None] | None = None,
    watch: DevWatch | None = None,
) -> list[float]:
    """The metric of each example of `devset`, in its order (an example the program fails on scores 0 and
    logs one line). `on_score(i, score)` is told each score of an example the program did not fail on, as
    it comes (from the evaluation's threads). `watch` counts each run and the LM calls it made."""
    if not devset:
        raise ValueError("the dev split is empty; give more examples or a --dev file")
    program = Guarded(program, watch=watch)
    metric = guarded_metric(spec)
    if on_score is not None:
        position = {id(ex): i for i, ex in enumerate(devset)}  # Evaluate hands the metric devset's own objects
        scored = metric

        def metric(example, pred, trace=None) -> float:
            value = scored(example, pred, trace)
            if pred is not None and not pred.get("failed", False) and id(example) in position:
                on_score(position[id(example)], float(value))
            return value

    result = dspy.Evaluate(
        devset=devset,
        metric=metric,
        num_threads=num_threads,
        display_progress=show_progress,
        failure_score=0.0,
        max_errors=len(devset) + 1,
    )(program)
    return [float(score) for *_, score in result.results]  # .score is rounded to 0.01%


LABELED_DEMOS = 2  # demonstrations taken from the training labels, where the examples carry them


def carries_labels(program: dspy.Module, examples: list[dspy.Example]) -> bool:
    """Whether the examples hold every field of one of the program's predictors, outputs included: then
    they can be shown to it as demonstrations (labeled demos), beside the bootstrapped ones."""
    if not examples:
        return False
    first = examples[0]
    return any(all(name in first for name in p.signature.fields) for _, p in program.named_predictors())


def trim_demos(program: dspy.Module) -> dspy.Module:
    """Each demonstration cut to its predictor's fields: a labeled demo is a whole training example, and the
    rest of it (hits, ground truth) has no place in a saved program."""
    for _, predictor in program.named_predictors():
        fields = predictor.signature.fields
        predictor.demos = [
            dspy.Example(**{k: v for k, v in demo.items() if k in fields or k == "augmented"})
            for demo in predictor.demos
        ]
    return program


def _optimizer(
    name: str,
    spec: MetricSpec,
    budget: int,
    n_train: int,
    prompt_lm,
    num_threads: int,
    seed: int,
    progress: Progress,
    labeled: int = 0,
):
    """The optimizer and its compile keyword arguments, sized so metric calls stay within `budget`.

    `labeled`: demonstrations a program may take from the training examples' own labels. DSPy fills the
    labeled demos up to `max_labeled_demos` counting the bootstrapped ones, so that is set to 2 + `labeled`: a
    candidate shows its (up to 2) bootstrapped demos and labeled ones up to 4 demos in all.
    """
    metric = progress.wrap(guarded_metric(spec))
    if name == "gepa":
        if prompt_lm is None:
            raise ValueError("gepa needs a reflection LM; pass --prompt-lm (or --lm, used for both)")
        opt = dspy.GEPA(
            metric=progress.wrap(guarded_gepa_metric(spec)),
            max_metric_calls=budget,
            reflection_lm=prompt_lm,
            reflection_minibatch_size=min(3, n_train),
            num_threads=num_threads,
            track_stats=True,
            seed=seed,
        )
        return opt, {}
    if name == "bootstrap-rs":
        # Each candidate program is scored on the training set; DSPy adds 3 seed candidates to those asked for.
        # When the budget cannot score those 4 on the whole training set, each is scored on the first budget/5
        # training examples and the rest of the budget bootstraps demos; else the zero-shot program would spend
        # it all and every candidate with demos would score 0 without being run.
        if budget >= 4 * n_train:
            candidates, valset_size = max(1, budget // n_train - 3), None
        else:
            candidates, valset_size = 1, max(1, budget // 5)
        opt = dspy.BootstrapFewShotWithRandomSearch(
            metric=metric,
            max_bootstrapped_demos=2,
            max_labeled_demos=2 + labeled if labeled else 0,
            num_candidate_programs=candidates,
            num_threads=num_threads,
        )
        return opt, {} if valset_size is None else {"valset_size": valset_size}
    if name == "simba":
        bsize = max(1, min(4, n_train))
        num_candidates = 2
        # a step samples num_candidates trajectories of each of bsize examples, then scores its new candidates
        # on the same batch: about bsize * (2 * num_candidates + 1) metric calls
        steps = max(1, budget // (bsize * (2 * num_candidates + 1)))
        opt = dspy.SIMBA(
            metric=metric,
            bsize=bsize,
            num_candidates=num_candidates,
            max_steps=steps,
            max_demos=2,
            prompt_model=prompt_lm,
            num_threads=num_threads,
        )
        return opt, {"seed": seed}
    try:  # miprov2, the last of the names compile_program accepts
        import optuna  # noqa: F401
    except ImportError as err:
        raise ImportError(f"miprov2 needs optuna; install it with: {install_hint('miprov2')}") from err
    trials = max(1, budget // n_train)
    opt = dspy.MIPROv2(
        metric=metric,
        prompt_model=prompt_lm,
        auto=None,
        num_candidates=2,
        max_bootstrapped_demos=2,
        max_labeled_demos=2 + labeled if labeled else 0,
        num_threads=num_threads,
        seed=seed,
        verbose=False,
    )
    return opt, {"num_trials": trials, "minibatch": False}


def compile_program(
    program: dspy.Module,
    *,
    optimizer: str,
    spec: MetricSpec,
    trainset: list[dspy.Example],
    devset: list[dspy.Example],
    budget: int,
    max_lm_calls: int | None = None,
    prompt_lm=None,
    num_threads: int = 4,
    seed: int = 0,
    show_progress: bool = False,
    on_progress: Callable[[str], None] | None = None,
    evaluator: DevEvaluator | None = None,
    journal: RunFolder | None = None,
    teacher: dspy.Module | None = None,
    choose: bool = False,
) -> CompileResult:
    """Tunes `program` with `optimizer` on `trainset` and scores it before and after on `devset`.

    The dev split is held out: optimizers select candidates on the training set only.

    Args:
        budget: Metric calls the optimizer may spend (its parameters are derived from it).
        max_lm_calls: LM calls the whole run may spend; after the baseline the metric budget is
            lowered to what the measured LM calls per example allow, and every request the optimizer sends
            (its proposer's and reflection's too) is charged to what is left after keeping the final
            evaluation: past it the optimizer's examples answer without an LM call and its own calls are
            refused (MIPROv2, which cannot go on without them, leaves the program untuned).
        prompt_lm: The LM that proposes instructions (GEPA's reflection, MIPROv2's and SIMBA's prompt model).
        on_progress: Called with a progress line (metric calls spent, best training score so far) after each
            of the optimizer's metric calls.
        evaluator: Scores the program before and after on `devset` elsewhere (optimize/remote.py: a Ray
            cluster) and counts the LM calls it made there; default: here, DSPy's Evaluate on `num_threads`.
            The optimizer itself always runs here, on DSPy's threads.
        teacher: The program whose runs on the training examples give the demonstrations (`program.offline()`:
            the offline twins, no LM call); `bootstrap-rs` and `miprov2` take one, the program itself by default.
        choose: After tuning, choose per stage the LM module or its offline twin, whichever scores higher end to
            end on `trainset` (`choose_twins`), so the program is never below the offline floor there; the
            dev scores after are the chosen program's. For whole programs (`DeepResearch`, `Gatherer`).
        journal: The run's working folder (optimize/resume.py): the dev scores before tuning it holds are not
            computed again, each new one is written to it as it comes, and so is the metric budget
            `max_lm_calls` leaves (a resumed run tunes under the budget its first start fixed).

    The budget holds: once BootstrapFewShotWithRandomSearch or MIPROv2 has made `budget` metric calls, the
    program it runs answers without an LM call and scores 0 (they score a few candidates of their own beyond
    those asked for). GEPA holds the budget itself; SIMBA's closing evaluation may pass it.

    An example the program fails on logs one line (its id and the reason; `Guarded`) and scores 0.

    Raises:
        NoModelAnswer: no example of the dev evaluation before tuning got an answer from the model (every LM
            call failed, or the program failed on every example); nothing is tuned. A resumed run that
            journaled dev scores before tuning is not checked again.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1 metric call, got {budget}")
    if not trainset:
        raise ValueError("the training split is empty; give more examples or a --data file")
    if choose and not hasattr(program, "with_twins"):
        raise ValueError("the per-stage choice of offline twins is made for whole programs, not one stage")
    if teacher is not None and optimizer not in TEACHABLE:
        raise ValueError(
            f"{optimizer} takes no teacher; choose {' or '.join(TEACHABLE)} to learn from the offline program"
        )
    if optimizer == "miprov2" and len(trainset) < 2:  # MIPROv2 splits its own validation set off the trainset
        raise ValueError(
            f"miprov2 needs at least 2 training examples, got {len(trainset)}; give more examples "
            f"(or --dev for a separate dev set) or choose another optimizer"
        )
    meter = UsageMeter()
    elsewhere = 0  # LM calls of the dev evaluations run by `evaluator`

    def dev_scores(candidate: dspy.Module) -> list[float]:
        nonlocal elsewhere
        if evaluator is None:
            return evaluate_scores(candidate, devset, spec, num_threads, show_progress)
        scores, calls = evaluator(candidate, devset)
        elsewhere += sum(calls.values())
        return scores

    def scores_before(watch: DevWatch) -> tuple[list[float], int]:
        """The dev scores before tuning, and how many examples were scored now (the others were journaled);
        the runs of those scored now are counted in `watch`."""
        nonlocal elsewhere
        known = journal.known_before(devset) if journal is not None else {}
        missing = [i for i in range(len(devset)) if i not in known]
        if missing:
            subset = [devset[i] for i in missing]
            if evaluator is None:
                record = None if journal is None else lambda j, s: journal.record_before(missing[j], s)
                scores = evaluate_scores(program, subset, spec, num_threads, show_progress, record, watch=watch)
            else:
                scores, calls = evaluator(program, subset, watch=watch)
                elsewhere += sum(calls.values())
                if journal is not None:
                    for i, score in zip(missing, scores, strict=True):
                        journal.record_before(i, score)
            known.update(zip(missing, scores, strict=True))
        return [known[i] for i in range(len(devset))], len(missing)

    with metered(meter), one_run_per_example():
        watch = DevWatch()
        before_scores, scored_now = scores_before(watch)
        # no example answered by the model: a dead server, or a program that fails on everything; the scores
        # (0, or whatever a program that catches its failures makes of nothing) say nothing of the program
        reason = watch.no_answer() if scored_now == len(devset) else None
        if reason is not None:
            if journal is not None:
                journal.forget_before()  # those scores stand for no answer: a rerun scores the examples again
            raise NoModelAnswer(f"no dev example got an answer from the model before tuning: {reason}")
        cap = None
        if max_lm_calls is not None and journal is not None and journal.budget is not None:
            budget, allowed = journal.budget  # fixed by the start that finished the evaluation before tuning
            cap = CallCap(allowed)
        elif max_lm_calls is not None:
            # per example scored by this start (journaled ones cost it nothing); the evaluation counts whole
            per_example = max((meter.total_calls + elsewhere) / max(scored_now, 1), 1e-9)
            spent = per_example * len(devset)
            left = max_lm_calls - spent - math.ceil(per_example * len(devset))  # keep the final eval
            budget = max(1, min(budget, int(left // per_example)))
            cap = CallCap(int(left))
            logger.info("metric budget %d after the LM-call budget (%.1f calls per example)", budget, per_example)
            if journal is not None:
                journal.record_budget(budget, cap.limit)
        progress = Progress(budget=budget, window=len(trainset), report=on_progress)
        labeled = LABELED_DEMOS if carries_labels(program, trainset) else 0
        opt, kwargs = _optimizer(
            optimizer, spec, budget, len(trainset), prompt_lm, num_threads, seed, progress, labeled
        )
        if "valset_size" in kwargs:  # candidates scored on the first examples of the (seeded) training split
            kwargs["valset"] = trainset[: kwargs.pop("valset_size")]
        if teacher is not None:  # wrapped and frozen like the student, so that their predictors agree
            kwargs["teacher"] = Guarded(frozen_like(teacher.deepcopy(), program))
        # GEPA holds max_metric_calls itself; SIMBA's closing evaluation of its candidates is left whole
        gate = Gate(progress if optimizer in GATED else None, cap)
        try:
            with capped(cap):
                tuned = trim_demos(opt.compile(Guarded(program.deepcopy(), gate), trainset=trainset, **kwargs).program)
        except LMCallBudgetSpent:  # a call the optimizer cannot do without (MIPROv2's proposer) found no room
            logger.warning("the LM-call budget ran out before %s finished; the program stays untuned", optimizer)
            tuned = program.deepcopy()
        choice_scores = None
        if choose:
            metric = guarded_metric(spec)
            tuned, choice_scores = choose_twins(tuned, trainset, metric, num_threads=num_threads)
        after_scores = dev_scores(tuned)
    return CompileResult(
        program=tuned,
        optimizer=optimizer,
        metric=spec.name,
        before=sum(before_scores) / len(before_scores),
        after=sum(after_scores) / len(after_scores),
        metric_budget=budget,
        lm_calls=meter.total_calls + elsewhere,
        n_train=len(trainset),
        n_dev=len(devset),
        before_scores=tuple(before_scores),
        after_scores=tuple(after_scores),
        metric_calls=progress.calls,
        choice_scores=choice_scores,
    )
