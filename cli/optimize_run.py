"""What `deepresearch optimize` does once its options are parsed (`deepresearch.cli.optimize`): compile a
program (or one stage) against a benchmark metric and save it. DSPy and the programs load here, not in the
command's parser, so `deepresearch optimize --help` answers at once."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from dspy.utils.callback import BaseCallback
from dspy.utils.exceptions import LMError

from deepresearch.eval.querysets import find_queryset
from deepresearch.eval.run_report import corpus_text
from deepresearch.optimize.compile import TEACHABLE, LMCallBudgetSpent, NoModelAnswer, compile_program
from deepresearch.optimize.metrics import (
    METRICS,
    WRITING_METRICS,
    Judging,
    metric_names,
    metric_spec,
)
from deepresearch.optimize.pools import POOL_STAGES, stage_pool
from deepresearch.optimize.remote import ExecutorEvaluator
from deepresearch.optimize.resume import RunFolder, settings_of
from deepresearch.optimize.saved import compile_record, describe, save_compiled
from deepresearch.optimize.targets import (
    RecordedOnly,
    Target,
    gather_target,
    record_candidates,
    research_target,
    stage_target,
    with_gold_labels,
    with_reference_plans,
)
from deepresearch.optimize.trainsets import (
    candidates_from_jsonl,
    candidates_to_jsonl,
    fingerprint,
    from_beir,
    from_frozen_cases,
    from_jsonl,
    from_queryset,
    from_taxobench,
    split_dev,
)
from deepresearch.programs import environment
from deepresearch.programs.config import ResearchConfig, preset
from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.lm.models import OFFLINE, preflight
from deepresearch.programs.lm.session import make_session_lm, open_lm
from deepresearch.programs.lm.usage import UsageMeter, metered
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.retrieval import data_dir, open_from_args
from deepresearch.programs.runtime.executor import check_ray_address, open_executor
from deepresearch.programs.stages.registry import STAGES
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from deepresearch.retrievers.sources import find_local

EXIT_FAILED = 3  # nothing was tuned because of failures (as `run` exits when its run failed; 2 is bad input)
# Stages of the research program whose output the research metrics (the papers the report cites) never see.
UNSCORED_STAGES = STAGES.unscored()


def resolve_stage(program: str, value: str, research_stages: dict[str, str]) -> str:
    """The stage `--stage` names for `program`: a stage name, `all`, or the attribute holding the stage's
    module (`writer` is `write`, `planner` is `plan`, or `gather_plan` for --program gather).

    Raises:
        ValueError: for a name that is no stage of the program (the message lists them).
    """
    table = {"research": research_stages, "gather": STAGES.gather()}.get(program, {})
    if value == "all" or value in table:
        return value
    aliases = {attr: name for name, attr in table.items()}
    if value in aliases:
        return aliases[value]
    raise ValueError(f"--stage {value} is not a stage of the {program} program; choose one of: all, {', '.join(table)}")


def _retriever(args: argparse.Namespace, default_preset: str = "default"):
    """The corpus and retriever the program searches: --corpus or --index, else the --data BEIR folder (a path or
    a name under $DEEPRESEARCH_DATA)."""
    train = find_local(args.data, data_dir()) if args.data is not None else None
    is_beir = train is not None and any((train / f).exists() for f in ("corpus.jsonl", "corpus.jsonl.gz"))
    spec = args.corpus or (str(train) if is_beir else None)
    if spec is None and args.index is None:
        raise ValueError("pass --corpus or --index: the program needs documents to search")
    retrieval = open_from_args(args, spec, default_preset=default_preset)
    return retrieval.corpus, retrieval.retriever


def _split(args, examples, dev_loader):
    examples = examples[: args.limit] if args.limit else examples
    if args.dev:
        return examples, dev_loader(args.dev, args.dev_split or args.split)
    return split_dev(examples, seed=args.seed)


def _research(args: argparse.Namespace, kind: str):
    given = {"depth": args.depth, "breadth": args.breadth, "hits_per_query": args.hits, "lm_timeout_s": args.lm_timeout}
    overrides = {k: v for k, v in given.items() if v is not None}
    if kind == "pool":  # the recorded inputs hold every passage: nothing is searched
        full = DeepResearch(retriever=RecordedOnly(), config=preset(args.preset, **overrides))
        attr = full.stage_table()[args.stage]
        examples = stage_pool(args.from_runs, args.stage, getattr(full, attr), args.limit)
        print(f"{len(examples)} recorded {args.stage} calls from {args.from_runs}", file=sys.stderr)
        return stage_target(full, args.stage), *split_dev(examples, seed=args.seed), None
    corpus, retriever = _retriever(args)
    full = DeepResearch(retriever=retriever, config=preset(args.preset, **overrides))

    def load(source, split):
        found = find_local(source, data_dir())
        return (
            from_beir(found, split or "train", corpus) if found is not None and found.is_dir() else from_jsonl(source)
        )

    if kind == STAGES.assess.tuning_target:
        if args.candidates:
            examples = candidates_from_jsonl(args.candidates)
        else:
            questions = load(args.data, args.split)[: args.limit] if args.limit else load(args.data, args.split)
            print(f"recording assessor candidates from {len(questions)} questions", file=sys.stderr)
            examples = asyncio.run(record_candidates(full, questions))
            path = Path(args.record_candidates or Path(args.out).with_suffix(".candidates.jsonl"))
            candidates_to_jsonl(examples, path)
            print(f"candidates: {path}", file=sys.stderr)
        # the assessor is tuned on what a run shows it: each paper's best sentences (`assess_sentences`)
        examples = [
            ex.copy(sentences=full.config.assess_sentences).with_inputs("task", "sources", "scores", "sentences")
            for ex in examples
        ]
        target = research_target(full, args.stage, kind)
        examples = with_gold_labels(examples, target.program)  # the optimizers may show them as demos
        return target, *split_dev(examples, seed=args.seed), corpus_text(corpus)
    target = research_target(full, args.stage, kind)
    trainset, devset = _split(args, load(args.data, args.split), load)
    if kind == STAGES.plan.tuning_target:  # the offline planner's plans, shown as demonstrations
        trainset = asyncio.run(with_reference_plans(trainset, target.program))
    return target, trainset, devset, corpus_text(corpus)


def _gather(args: argparse.Namespace, kind: str):
    from deepresearch.eval.run_gather import load_frozen_cases  # lazy: start-up

    # ScholarGym's own BM25 for its queries, unless an index or --bm25-preset says otherwise
    preset = "default" if find_queryset(args.data, data_dir())[0] == "beir" else "scholargym"
    corpus, retriever = _retriever(args, preset)
    full = Gatherer(retriever, GatherConfig(iterations=args.iterations, lm_timeout_s=args.lm_timeout))
    if kind == STAGES.assess.tuning_target:
        if not args.candidates:
            raise ValueError(
                "the gathering assessor is tuned on frozen candidates: run `deepresearch eval gather "
                "... --out DIR` once and pass --candidates DIR/results.jsonl"
            )
        target = gather_target(full, args.stage, kind)
        examples = with_gold_labels(from_frozen_cases(load_frozen_cases(args.candidates, corpus)), target.program)
        return target, *split_dev(examples, seed=args.seed), None
    examples = from_queryset(args.data, args.split, data_dir=data_dir())
    return (
        gather_target(full, args.stage, kind),
        *_split(args, examples, lambda source, split: from_queryset(source, split, data_dir=data_dir())),
        None,
    )


def _taxonomy(args: argparse.Namespace, kind: str):
    if args.stage != "all":
        raise ValueError("the taxonomy program is tuned as a whole; use --stage all")
    program = TaxonomyBuilder()
    return (
        Target(program, program, "all", {}),
        *_split(args, from_taxobench(args.data), lambda s, _: from_taxobench(s)),
        None,
    )


TARGETS = {"research": _research, "gather": _gather, "taxonomy": _taxonomy}  # --program -> its target and data


def dev_setup(args: argparse.Namespace, session, *, kind: str, metric_target: str):
    """The program being tuned, its metric and an LM call counter, built from the options as `main` builds them:
    what a worker of --ray needs to score dev examples (optimize/remote.py)."""
    support = _support(args, session)
    counter = LMCalls(task=session.lm, judge=support.lm)
    with session.context():
        target, _, _, text_of = TARGETS[args.program](args, kind)
    return target.program, metric_spec(metric_target, args.metric, Judging(support=support, text_of=text_of)), counter


def _dev_evaluator(args: argparse.Namespace, kind: str, metric_target: str):
    """With --ray, the dev evaluations on the cluster (optimize/remote.py); else none (here, on --threads)."""
    if not args.ray:
        return contextlib.nullcontext()
    remote = argparse.Namespace(**vars(args))
    # the research assessor's candidates are recorded once, here, and read by every worker
    if args.program == "research" and kind == STAGES.assess.tuning_target and not args.candidates:
        remote.candidates = str(args.record_candidates or Path(args.out).with_suffix(".candidates.jsonl"))
    setup = functools.partial(dev_setup, kind=kind, metric_target=metric_target)
    return ExecutorEvaluator(open_executor(ray=args.ray), setup, remote)


class LMCalls(BaseCallback):
    """Counts every call of the LMs it is attached to, from any thread (optimizers run their own).

    DSPy's usage tracker misses calls an optimizer makes outside the threads that inherit the run's
    settings (GEPA's reflection and evaluation); an LM's own callbacks see them all. Cache hits count too.
    """

    def __init__(self, **lms):
        self.calls: dict[str, int] = {}
        self._roles: dict[int, str] = {}
        self._started: dict[str, str] = {}
        self._lock = threading.Lock()
        for role, lm in lms.items():  # each LM under its role, in this order
            self.attach(lm, role)

    def attach(self, lm, role: str) -> None:
        if lm is not None and id(lm) not in self._roles:
            self._roles[id(lm)] = role
            self.calls.setdefault(role, 0)
            lm.callbacks = [*lm.callbacks, self]

    def on_lm_start(self, call_id, instance, inputs):
        with self._lock:
            self._started[call_id] = self._roles.get(id(instance), "other")

    def on_lm_end(self, call_id, outputs, exception=None):
        with self._lock:
            role = self._started.pop(call_id, "other")
            if not isinstance(exception, LMCallBudgetSpent):  # refused before it was sent: no call
                self.calls[role] = self.calls.get(role, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())


class OptimizerLMError(ValueError):
    """An LM call the optimizer itself made (MIPROv2's proposer, a bootstrapping teacher) failed, and the
    optimizer gave up; one line, saying how to resume."""


def judge_cache(args: argparse.Namespace) -> Path:
    return Path(args.judge_cache or Path.home() / ".cache" / "dspy-deepresearch" / "judge").expanduser()


def _support(args: argparse.Namespace, session):
    """The judge of the writing metrics: --judge-lm (checked now, verdicts cached) or the lexical rule."""
    from deepresearch.eval.judges import JudgeCache, open_judge  # lazy: start-up
    from deepresearch.eval.quality import Support  # lazy: start-up

    if not args.judge_lm or args.judge_lm == OFFLINE:
        return Support()
    judge = open_judge(args, session.model)
    cache = judge_cache(args)
    try:
        return Support(judge, JudgeCache(cache))
    except OSError as err:
        raise ValueError(
            f"cannot keep judge verdicts in {cache} ({err.strerror or type(err).__name__}); pass a "
            f"writable --judge-cache"
        ) from None


def check_out(args: argparse.Namespace) -> list[Path]:
    """Makes sure the compiled file (and the recorded candidates) can be written, before any LM call.

    Creates the missing parent folders, and returns the first one it created of each. Raises ValueError (one
    line) otherwise.
    """
    out = Path(args.out).expanduser()
    if out.is_dir():
        raise ValueError(f"--out {args.out} is a folder; pass a file path such as {out / 'compiled.json'}")
    if out.suffix != ".json":
        raise ValueError(f"--out {args.out} should be a .json file (the compiled program's state)")
    if args.record_candidates and Path(args.record_candidates).expanduser().is_dir():
        raise ValueError(
            f"--record-candidates {args.record_candidates} is a folder; pass a file path such as "
            f"{Path(args.record_candidates) / 'candidates.jsonl'}"
        )
    folders = [out.parent] + ([Path(args.record_candidates).expanduser().parent] if args.record_candidates else [])
    if args.judge_lm and args.judge_lm != OFFLINE:
        folders.append(judge_cache(args))
    created = []
    for folder in dict.fromkeys(folders):
        top = next((p for p in reversed((folder, *folder.parents)) if not p.exists()), None)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):  # writable, not only present
                pass
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise ValueError(
                f"cannot write to {folder} ({reason}); pass an --out (and --judge-cache) whose folder can be created"
            ) from None
        if top is not None:
            created.append(top)
    return created


def remove_empty(folders: list[Path]) -> None:
    """Removes each of `folders` (made by `check_out`) that holds no file: a run that saved nothing leaves none."""
    for folder in folders:
        if folder.is_dir() and all(p.is_dir() for p in folder.rglob("*")):
            shutil.rmtree(folder, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    if args.show:
        print(describe(compile_record(args.show)))
        return 0
    if args.metric is None or args.out is None:
        raise ValueError("pass --metric and --out (the compiled program file), or --show COMPILED to read one")
    model = args.lm or environment.default_lm()
    if not model or model == OFFLINE:
        raise ValueError("optimization tunes LM prompts; pass --lm (any DSPy/LiteLLM model string)")
    research_stages = STAGES.research(preset(args.preset).strategy)
    args.stage = resolve_stage(args.program, args.stage, research_stages)
    if args.from_runs is not None:
        if args.program != "research" or args.stage not in POOL_STAGES:
            raise ValueError(f"--from-runs tunes one stage of the research program: --stage {'|'.join(POOL_STAGES)}")
        if args.data is not None:
            raise ValueError("pass --from-runs or --data, not both: the recorded runs are the training examples")
    elif args.data is None:
        raise ValueError("pass --data (the training questions) or --from-runs DIR (recorded runs)")
    # The assessors have stage-level metrics of their own; the research planner too (Ret.R, Avg.Distance).
    kind = STAGES.frozen_target(args.program, args.stage) or "program"
    kind = kind if kind != "program" and args.metric in METRICS[kind] else "program"
    if args.from_runs is not None:
        kind = "pool"
    if args.choose_stages and (args.program == "taxonomy" or kind != "program" or args.stage != "all"):
        raise ValueError("--choose-stages chooses among a whole program's stages: pass --program research or gather")
    if args.teacher == "offline":  # checked before any LM request
        if args.program == "taxonomy" or kind != "program" or args.stage != "all":
            raise ValueError(
                "--teacher offline teaches a whole program: pass --program research or gather without --stage"
            )
        if args.optimizer not in TEACHABLE:
            raise ValueError(f"--teacher offline needs --optimizer {' or '.join(TEACHABLE)}, not {args.optimizer}")
    if args.program == "research" and args.stage in UNSCORED_STAGES:
        raise ValueError(
            f"--stage {args.stage}: {UNSCORED_STAGES[args.stage]}, so no research metric ("
            f"{', '.join(metric_names('research'))}) scores it; choose another stage"
        )
    metric_target = {"program": args.program, "pool": args.stage}.get(kind, kind)
    metric_spec(metric_target, args.metric)  # a wrong name fails here, before anything is loaded
    if args.ray:  # a cluster that is not there fails now, not once the LMs and the data are loaded
        check_ray_address(args.ray)
    made = check_out(args)  # an optimization that cannot save its result fails now, not after its LM calls
    # an interrupted run with these settings resumes; one with others is refused before any LM request
    work = RunFolder.open(args.out, settings_of(args), overwrite=getattr(args, "overwrite", False))
    try:
        return _tune(args, work, made, kind, metric_target)
    except BaseException as err:
        # bad input found once the working folder was open (a missing --data file, a bad --corpus or --lm...), or
        # a stop before anything was paid for: no folder is left behind unless it holds what a rerun resumes from
        stopped = isinstance(err, KeyboardInterrupt)
        if stopped:
            work.stop()
        if not work.abandon():
            remove_empty(made)
        elif stopped:
            print(f"deepresearch optimize: rerun the same command to resume from {work.folder}", file=sys.stderr)
        raise


def _tune(args: argparse.Namespace, work: RunFolder, made: list[Path], kind: str, metric_target: str) -> int:
    """`run` once its options are checked and its working folder is open: loads the LMs, the data and the
    program, tunes it and saves it."""
    # the LMs are checked before any dataset or corpus is loaded: a bad key or a dead server fails in seconds
    session = open_lm(args, default_offline=False)
    if args.program == "research" and args.data is not None and find_local(args.data, data_dir()) is None:
        raise ValueError(
            f"--data {args.data}: no such file, folder or dataset under $DEEPRESEARCH_DATA; pass a BEIR folder or a "
            f"JSONL file of questions"
        )
    work.install_cache(enabled=not args.no_cache, cache_dir=args.cache_dir or environment.lm_cache_dir())
    prompt_lm = session.lm
    if args.prompt_lm and args.prompt_lm != session.model:
        prompt_lm = make_session_lm(args, args.prompt_lm)
        if prompt_lm is None:
            raise ValueError("--prompt-lm proposes instructions; pass an LM, not 'offline'")
        if not args.no_preflight:
            preflight(prompt_lm, timeout_s=min(args.lm_timeout, 60.0))

    support = _support(args, session)
    counter = LMCalls(task=session.lm, proposer=prompt_lm, judge=support.lm)

    quiet = getattr(args, "quiet", False)  # -q: no evaluation bar and no progress lines
    meter = UsageMeter()  # every request of the run: recorded candidates, the optimizer, both evaluations
    with session.context(), metered(meter):
        target, trainset, devset, text_of = TARGETS[args.program](args, kind)
        spec = metric_spec(metric_target, args.metric, Judging(support=support, text_of=text_of))
        left = None if args.max_lm_calls is None else max(0, args.max_lm_calls - meter.total_calls)
        if work.resumed:
            print(work.summary(devset), file=sys.stderr)
        elif not quiet:
            print(f"working folder (rerun the same command to resume): {work.folder}", file=sys.stderr)
        started = time.perf_counter()
        with _dev_evaluator(args, kind, metric_target) as evaluator:
            if evaluator is not None and not quiet:
                print(f"dev split scored on {evaluator.kind} ({evaluator.workers} at once)", file=sys.stderr)
            try:
                result = compile_program(
                    target.program,
                    optimizer=args.optimizer,
                    spec=spec,
                    trainset=trainset,
                    devset=devset,
                    budget=args.budget,
                    max_lm_calls=left,
                    prompt_lm=prompt_lm,
                    num_threads=args.workers,
                    seed=args.seed,
                    show_progress=sys.stderr.isatty() and not quiet,
                    on_progress=None if quiet else lambda line: print(line, file=sys.stderr, flush=True),
                    evaluator=evaluator,
                    journal=work,
                    teacher=target.program.offline() if args.teacher == "offline" else None,
                    choose=args.choose_stages,
                )
            except LMError as err:  # one that ended the optimizer: say how to pick the run up again
                reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
                raise OptimizerLMError(
                    f"the optimizer stopped on a failed LM call ({type(err).__name__}: {reason}); what it had "
                    f"done is kept in {work.folder}: rerun the same command to resume (a longer --lm-timeout "
                    f"may be given)"
                ) from None
            except KeyboardInterrupt:
                work.stop()  # the optimizer's threads send nothing more and what they are cut short of is not kept
                raise
            except NoModelAnswer as err:  # nothing to tune: no compiled file, and no working folder unless kept
                kept = work.abandon(keep=args.keep_partial)
                if not kept:
                    remove_empty(made)
                where = f" ({work.folder} is kept)" if kept else ""
                print(f"deepresearch optimize: error: {err}; no compiled program was saved{where}", file=sys.stderr)
                return EXIT_FAILED
        for role, n in (evaluator.calls if evaluator is not None else {}).items():  # made on the cluster
            counter.calls[role] = counter.calls.get(role, 0) + n
    if target.program is target.full:  # the whole program was tuned: the optimizer returned a tuned copy of it
        target.full = result.program
    target.program = result.program
    final = target.finish()
    config = getattr(target.full, "config", None)
    is_settings = dataclasses.is_dataclass(config) and not isinstance(config, type)  # an instance, not a class
    saved_config = dataclasses.asdict(config) if is_settings and config is not None else None
    if isinstance(config, ResearchConfig):  # its saved form: flat names, as run.json's
        saved_config = config.to_dict()
    meta = {
        "program": args.program,
        "stage": args.stage,
        "metric": spec.name,
        "optimizer": args.optimizer,
        "teacher": args.teacher or "the program itself",
        "offline_stages": list(result.program.twin_stages()) if result.choice_scores is not None else None,
        "choice_scores": result.choice_scores,
        "judge": support.name if args.metric in WRITING_METRICS.get(metric_target, ()) else None,
        "from_runs": args.from_runs,
        "data": args.data or args.from_runs,
        "split": args.split,
        "candidates": args.candidates,
        "dev": args.dev or f"{len(devset)} of the examples, held out (seed {args.seed})",
        "before": result.before,
        "after": result.after,
        "ci95": result.interval(),
        "before_scores": list(result.before_scores),
        "after_scores": list(result.after_scores),
        "metric_budget": result.metric_budget,
        "metric_calls": result.metric_calls,
        "seconds": round(time.perf_counter() - started, 1),
        "lm_calls": counter.total,
        "lm_calls_by_role": dict(counter.calls),
        "compile_lm_calls": result.lm_calls,
        "lm": session.model,
        "prompt_lm": args.prompt_lm or session.model,
        "n_train": result.n_train,
        "n_dev": result.n_dev,
        "trainset": fingerprint(trainset),
        "config": saved_config,
    }
    path = save_compiled(final, args.out, meta)
    work.finish(keep=args.keep_partial)
    print(result.table())
    roles = ", ".join(f"{role} {n}" for role, n in counter.calls.items() if n)
    print(f"compiled: {path}  (LM calls: {counter.total}{f': {roles}' if roles else ''})")
    return 0
