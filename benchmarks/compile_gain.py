"""Compile gain of a stage with a real model: before and after on a held-out dev split.

`--stage gather_assess` (the gathering assessor, on F1): one command records a frozen pool of candidates without the LM (the offline gathering loop over the first
`--claims` SciFact *train* claims), keeps the searches with at least one ground-truth paper among their top
`--max-candidates` candidates, labels each candidate from the qrels (the optimizers may show training
examples with their labels as demonstrations), splits them by claim into train and dev (no claim in both), compiles the
gathering assessor (`CandidateAssessor`, second look off) with each optimizer of `--optimizers`, and prints
and writes, per optimizer: dev F1 before and after with the paired bootstrap 95% interval of the change, LM
calls and metric calls spent, seconds. The offline assessor's dev F1 on the same examples is the floor.

`--stage assess` (the research assessor, on F1): the pool is the top `--max-candidates` BM25 hits of each of
the first `--claims` SciFact train claims, recorded from retrieval alone, keeping the searches with a relevant
paper among them; each paper carries its qrels label, and train and dev are disjoint claims. The offline
relevance rule (retrieval score and key-term coverage) is the floor.

`--stage plan` (the research planner, on Ret.R): the pool is the first `--claims` SciFact train claims with
their relevant papers; no LM is needed to record it, since the planner's only input is the question. Each
example plans `--breadth` queries for one claim and searches each with BM25; Ret.R is the share of the
claim's relevant papers that some query ranks within the `--hits` a research run reads. Train and dev are
disjoint claims. The offline planner (the question's key terms, then feedback terms) is the floor.

`--stage extract|merge|write` (the writing stages, on the citation support of what they write): the pool is
the stage log of offline research runs (`--preset quick`, `--stage-log`) over the first `--claims` SciFact
train claims, recorded without the LM: each recorded call's inputs (the passages, learnings or findings the
offline program gave the stage) become one example, and train and dev come from disjoint runs. The metric is
`--metric` of `deepresearch.optimize.metrics.WRITING_METRICS`, judged by the offline lexical rule (a claim is
supported when its cited passages hold enough of its content words), so scoring costs no LM call. The
stage's offline twin is the floor.

    python -m benchmarks.compile_gain --stage gather_assess --lm openai/qwen05 --api-base http://127.0.0.1:8092/v1 \\
        --claims 60 --train 12 --dev 30 --max-candidates 5 --budget 48 --optimizers bootstrap-rs --workers 1 \\
        --out benchmarks/compile_gain_assess_qwen05.json
    python -m benchmarks.compile_gain --stage plan --lm openai/qwen05 --api-base http://127.0.0.1:8092/v1 \\
        --claims 200 --train 16 --dev 40 --budget 64 --optimizers bootstrap-rs,miprov2 --workers 1 \\
        --out benchmarks/compile_gain_plan_qwen05.json
    python -m benchmarks.compile_gain --stage extract --lm openai/qwen05 --api-base http://127.0.0.1:8092/v1 \\
        --claims 30 --train 8 --dev 20 --budget 32 --optimizers bootstrap-rs,miprov2 --workers 1 \\
        --out benchmarks/compile_gain_extract_qwen05.json

LM answers are cached (DSPy's disk cache, `--cache-dir`): run the same command again after an interruption and
every call made before it is answered from the cache, so the run resumes where it stopped. Not collected by
pytest and not run by `python -m benchmarks` (it needs a model server).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dspy

DEFAULT_DATA = Path(os.environ.get("DEEPRESEARCH_DATA", "../shared/data"))
RECORDED = ("extract", "merge", "write")  # the writing stages, tuned on recorded offline runs


def record_pool(folder: Path, claims: int) -> Path:
    """The offline loop's searches over the first `claims` SciFact train claims (no LM); cached in `folder`."""
    from deepresearch import cli

    results = folder / "results.jsonl"
    if not results.exists():
        code = cli.main(
            [
                "eval",
                "gather",
                "--data",
                "scifact",
                "--qrels",
                "train",
                "--lm",
                "offline",
                "--limit",
                str(claims),
                "--out",
                str(folder),
                "-q",
                "--bootstrap",
                "0",
            ]
        )
        if code != 0:
            raise SystemExit(f"recording the frozen pool failed (exit {code})")
    return results


def record_runs(folder: Path, claims: int) -> Path:
    """Offline research runs (`--preset quick`, stage log kept) over the first `claims` SciFact train claims."""
    from deepresearch import cli
    from deepresearch.optimize.trainsets import from_beir

    for i, ex in enumerate(from_beir(DEFAULT_DATA / "scifact", "train")[:claims]):
        run = folder / f"q{i:03d}"
        if (run / "report.md").exists():
            continue
        argv = ["run", ex.question, "--corpus", "scifact", "--lm", "offline", "--preset", "quick"]
        with contextlib.redirect_stdout(sys.stderr):  # each run's summary lines; stdout keeps the figures
            code = cli.main([*argv, "--stage-log", "--out", str(run), "--overwrite", "-q"])
        if code != 0:
            raise SystemExit(f"recording offline run {run} failed (exit {code})")
    return folder


def split_by_claim(examples: list[dspy.Example], n_train: int, n_dev: int, seed: int, key: str = "query_id"):
    """Train and dev examples from disjoint claims (seeded): dev takes whole claims until it has `n_dev`."""
    claims = sorted({ex[key] for ex in examples})
    random.Random(seed).shuffle(claims)
    dev, train = [], []
    for claim in claims:
        group = [ex for ex in examples if ex[key] == claim]
        (dev if len(dev) < n_dev else train).extend(group)
    return train[:n_train], dev[:n_dev]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("gather_assess", "assess", "plan", *RECORDED), default="gather_assess")
    parser.add_argument("--lm", required=True)
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--claims", type=int, default=60, help="SciFact train claims in the frozen pool")
    parser.add_argument("--train", type=int, default=8, help="training examples (searches)")
    parser.add_argument("--dev", type=int, default=12, help="dev examples (searches), from other claims")
    parser.add_argument("--max-candidates", type=int, default=5, help="top candidates of a search shown")
    parser.add_argument("--breadth", type=int, default=3, help="plan: queries planned per claim")
    parser.add_argument("--hits", type=int, default=10, help="plan: hits of each query a research run reads")
    parser.add_argument("--metric", default="quality", help="extract/merge/write: the writing metric tuned")
    parser.add_argument("--budget", type=int, default=16, help="metric calls per optimizer")
    parser.add_argument(
        "--optimizers",
        default="bootstrap-rs,miprov2",
        help="comma-separated; `none`: only the uncompiled stage on dev; `teacher`: "
        "BootstrapFewShot with the offline stage teaching (2 demos, no LM call to compile)",
    )
    parser.add_argument("--workers", type=int, default=2, help="examples evaluated at once")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="reply cap (default: 200 assess, 512 plan, the stage's own)"
    )
    parser.add_argument("--lm-timeout", type=float, default=900.0)
    parser.add_argument("--cache-dir", default=None, help="LM answer cache (default: DSPy's)")
    parser.add_argument("--pool", default=None, help="pool folder (default: beside --out)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--unused", action="store_true", help="write: also score the uncompiled stage on the pool's other claims"
    )
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args(argv)

    from deepresearch.cli.optimize_run import LMCalls
    from deepresearch.optimize.compile import compile_program, evaluate_scores, paired_bootstrap
    from deepresearch.programs.lm.models import SchemaAdapter

    if args.cache_dir:
        dspy.configure_cache(disk_cache_dir=args.cache_dir)
    out = Path(args.out)
    setups = {
        "plan": plan_setup,
        "gather_assess": assess_setup,
        "assess": research_assess_setup,
        **dict.fromkeys(RECORDED, recorded_setup),
    }
    setup = setups[args.stage](args, out)
    print(
        f"{setup.pool_note}; train {len(setup.trainset)}, dev {len(setup.devset)} (disjoint claims)",
        file=sys.stderr,
    )
    lm = dspy.LM(
        args.lm,
        api_base=args.api_base,
        api_key=os.environ.get("DEEPRESEARCH_API_KEY", "local"),
        max_tokens=args.max_tokens or setup.max_tokens,
        temperature=0.0,
        timeout=args.lm_timeout,
        num_retries=1,
    )
    counter = LMCalls()
    counter.attach(lm, "task")
    floor = evaluate_scores(setup.floor, setup.devset, setup.spec, num_threads=1)
    report = {
        "benchmark": "compile_gain",
        "stage": args.stage,
        "metric": setup.spec.name,
        "lm": args.lm,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}; LM on llama-server"
        if args.api_base
        else platform.machine(),
        "command": "python -m benchmarks.compile_gain " + " ".join(argv if argv is not None else sys.argv[1:]),
        "data": setup.data,
        "split": {"train": len(setup.trainset), "dev": len(setup.devset), "by": "claim", "seed": args.seed},
        "floor_offline_dev": sum(floor) / len(floor),
        "floor_offline_dev_scores": floor,
        "optimizers": {},
    }
    rule = [setup.spec.score(ex, setup.rule(ex)) for ex in setup.devset] if setup.rule else None
    if rule is not None:  # how far ranking alone goes: a model that learnt only the rank scores this much
        report["rule_first_paper_dev"] = sum(rule) / len(rule)
    adapter = SchemaAdapter() if args.api_base else None
    names = [o.strip() for o in args.optimizers.split(",") if o.strip()]
    if "none" in names:  # the stage as it ships, on dev, against the floor: no compile
        started = time.perf_counter()
        with dspy.context(lm=lm, adapter=adapter):
            scores = evaluate_scores(setup.program(), setup.devset, setup.spec, num_threads=args.workers)
        report["uncompiled"] = {
            "dev": sum(scores) / len(scores),
            "vs_floor_ci95": paired_bootstrap(floor, scores),
            "lm_calls": counter.total,
            "seconds": round(time.perf_counter() - started, 1),
            "dev_scores": scores,
        }
        print(f"uncompiled: dev {setup.spec.name} {report['uncompiled']['dev']:.3f}; LM calls {counter.total}")
        names.remove("none")
    if args.unused and setup.unused:  # a check held out from whatever was tuned on train and dev
        with dspy.context(lm=lm, adapter=adapter):
            scores = evaluate_scores(setup.program(), setup.unused, setup.spec, num_threads=args.workers)
        base = evaluate_scores(setup.floor, setup.unused, setup.spec, num_threads=1)
        report["uncompiled_unused"] = {
            "examples": len(scores),
            "floor": sum(base) / len(base),
            "uncompiled": sum(scores) / len(scores),
            "vs_floor_ci95": paired_bootstrap(base, scores),
            "floor_scores": base,
            "scores": scores,
        }
        print(
            f"uncompiled on {len(scores)} unused examples: {sum(scores) / len(scores):.3f}, floor {sum(base) / len(base):.3f}"
        )
    if "teacher" in names:  # BootstrapFewShot with the offline stage teaching: its demos cost no LM call
        names.remove("teacher")
        started, calls = time.perf_counter(), counter.total
        optimizer = dspy.BootstrapFewShot(
            metric=lambda ex, pred, trace=None: setup.spec.score(ex, pred),
            max_bootstrapped_demos=2,
            max_labeled_demos=0,
            max_rounds=1,
        )
        taught = optimizer.compile(setup.program(), teacher=setup.floor, trainset=setup.trainset)
        with dspy.context(lm=lm, adapter=adapter):
            scores = evaluate_scores(taught, setup.devset, setup.spec, num_threads=args.workers)
        report["teacher"] = {
            "dev": sum(scores) / len(scores),
            "vs_floor_ci95": paired_bootstrap(floor, scores),
            "demos": sum(len(p.demos) for _, p in taught.named_predictors()),
            "lm_calls": counter.total - calls,
            "seconds": round(time.perf_counter() - started, 1),
            "dev_scores": scores,
        }
        print(f"taught by the offline stage: dev {setup.spec.name} {report['teacher']['dev']:.3f}")
    for name in names:
        started, calls_before = time.perf_counter(), counter.total
        with dspy.context(lm=lm, adapter=adapter):
            result = compile_program(
                setup.program(),
                optimizer=name,
                spec=setup.spec,
                trainset=setup.trainset,
                devset=setup.devset,
                budget=args.budget,
                prompt_lm=lm,
                num_threads=args.workers,
                seed=args.seed,
                on_progress=lambda line, n=name: print(f"[{n}] {line}", file=sys.stderr, flush=True),
            )
        ci = paired_bootstrap(result.before_scores, result.after_scores)
        vs_floor = paired_bootstrap(floor, result.after_scores)
        report["optimizers"][name] = {
            "before": result.before,
            "after": result.after,
            "change": result.after - result.before,
            "ci95": ci,
            "after_vs_floor_ci95": vs_floor,
            **({"after_vs_first_paper_ci95": paired_bootstrap(rule, result.after_scores)} if rule else {}),
            "lm_calls": counter.total - calls_before,
            "metric_calls": result.metric_calls,
            "seconds": round(time.perf_counter() - started, 1),
            "demos": sum(len(p.demos) for _, p in result.program.named_predictors()),
            "before_scores": list(result.before_scores),
            "after_scores": list(result.after_scores),
        }
        print(
            f"{name}: dev {setup.spec.name} {result.before:.3f} -> {result.after:.3f} "
            f"({result.after - result.before:+.3f}, 95% CI {ci[0]:+.3f} to {ci[1]:+.3f}); "
            f"LM calls {counter.total - calls_before}",
            flush=True,
        )
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")  # after each optimizer
    print(f"offline floor on dev: {setup.spec.name} {report['floor_offline_dev']:.3f}")
    if rule is not None:
        print(f"keeping each search's first paper on dev: {setup.spec.name} {report['rule_first_paper_dev']:.3f}")
    print(f"results: {out}")
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


@dataclass
class Setup:
    """One stage's measurement: a fresh program to compile, its metric, the split, and the offline floor."""

    program: Callable[[], dspy.Module]
    spec: object
    trainset: list
    devset: list
    floor: dspy.Module
    data: str
    pool_note: str
    max_tokens: int
    # a trivial reference beside the floor, where the stage has one: the assessors' "keep the first paper"
    rule: Callable[[dspy.Example], dspy.Prediction] | None = None
    unused: list = field(default_factory=list)  # the pool's examples of claims neither split holds


def assess_setup(args: argparse.Namespace, out: Path) -> Setup:
    from deepresearch.eval.run_gather import load_frozen_cases
    from deepresearch.optimize.metrics import metric_spec
    from deepresearch.optimize.targets import with_gold_labels
    from deepresearch.optimize.trainsets import from_frozen_cases
    from deepresearch.programs.stages.gathering import CandidateAssessor, OfflineCandidateAssessor
    from deepresearch.retrievers.corpus import load_corpus
    from deepresearch.signatures.types import Judgement

    pool = record_pool(Path(args.pool or out.with_suffix(".pool")), args.claims)
    corpus = load_corpus(DEFAULT_DATA / "scifact")
    examples = []
    for ex in from_frozen_cases(load_frozen_cases(pool, corpus)):
        hits = list(ex.hits)[: args.max_candidates]
        if set(ex.gt_ids) & {h.doc.doc_id for h in hits}:
            examples.append(ex.copy(hits=hits).with_inputs("question", "subquery", "checklist", "hits"))
    # each example also carries the qrels' label of every candidate: the optimizers may show them as demos
    examples = with_gold_labels(examples, CandidateAssessor(second_look=False))
    trainset, devset = split_by_claim(examples, args.train, args.dev, args.seed)
    return Setup(
        program=lambda: CandidateAssessor(second_look=False),
        spec=metric_spec("assessor", "f1"),
        trainset=trainset,
        devset=devset,
        floor=OfflineCandidateAssessor(),
        data=f"SciFact train claims 1-{args.claims}, offline loop (T=5) searches with a ground-truth "
        f"paper in their top {args.max_candidates}",
        pool_note=f"pool {pool}: {len(examples)} searches with a ground-truth candidate",
        max_tokens=200,
        rule=lambda ex: dspy.Prediction(
            judgements=[Judgement(source_id=ex.hits[0].doc.doc_id, label="relevant", reason="ranked first")]
        ),
    )


def research_assess_setup(args: argparse.Namespace, out: Path) -> Setup:
    from deepresearch.optimize.metrics import metric_spec
    from deepresearch.optimize.targets import record_candidates, with_gold_labels
    from deepresearch.optimize.trainsets import from_beir
    from deepresearch.programs.config import preset
    from deepresearch.programs.research.program import DeepResearch
    from deepresearch.programs.stages.assessor import Assessor, OfflineAssessor
    from deepresearch.retrievers.bm25 import BM25Retriever
    from deepresearch.retrievers.corpus import load_corpus

    folder = DEFAULT_DATA / "scifact"
    config = preset("standard", hits_per_query=args.max_candidates)
    full = DeepResearch(retriever=BM25Retriever(load_corpus(folder / "corpus.jsonl")), config=config)
    claims = from_beir(folder, "train")[: args.claims]
    examples = [
        ex.copy(sentences=config.assess_sentences, query_id=claim.query_id).with_inputs(
            "task", "sources", "scores", "sentences"
        )
        for ex, claim in zip(asyncio.run(record_candidates(full, claims)), claims, strict=True)
        if ex.relevant_ids
    ]
    examples = with_gold_labels(examples, Assessor(keep_uncertain=config.keep_uncertain))
    trainset, devset = split_by_claim(examples, args.train, args.dev, args.seed)
    return Setup(
        program=lambda: Assessor(keep_uncertain=config.keep_uncertain),
        spec=metric_spec("assessor", "f1"),
        trainset=trainset,
        devset=devset,
        floor=OfflineAssessor(keep_uncertain=config.keep_uncertain),
        data=f"SciFact train claims 1-{args.claims}: the top {args.max_candidates} BM25 hits of each claim, "
        f"searches with a relevant paper among them; each paper shown as its {config.assess_sentences} sentences "
        "on the task",
        pool_note=f"pool: {len(examples)} searches with a relevant candidate (retrieval only, no LM)",
        max_tokens=200,
        rule=lambda ex: dspy.Prediction(kept=list(ex.sources[:1])),
    )


def plan_setup(args: argparse.Namespace, out: Path) -> Setup:
    from deepresearch.optimize.metrics import metric_spec
    from deepresearch.optimize.targets import PlanAndSearch, with_reference_plans
    from deepresearch.optimize.trainsets import from_beir
    from deepresearch.programs.stages.planner import OfflinePlanner
    from deepresearch.retrievers.bm25 import BM25Retriever
    from deepresearch.retrievers.corpus import load_corpus

    folder = DEFAULT_DATA / "scifact"
    retriever = BM25Retriever(load_corpus(folder / "corpus.jsonl"), tokenizer="scholargym")
    examples = from_beir(folder, "train")[: args.claims]
    trainset, devset = split_by_claim(examples, args.train, args.dev, args.seed)

    def program() -> PlanAndSearch:
        return PlanAndSearch(retriever, breadth=args.breadth, read_k=args.hits)

    # each training claim also carries the offline planner's plan: the optimizers may show it as a demo
    trainset = asyncio.run(with_reference_plans(trainset, program()))

    floor = program()
    floor.planner = OfflinePlanner(retriever)
    return Setup(
        program=program,
        spec=metric_spec("planner", "recall"),
        trainset=trainset,
        devset=devset,
        floor=floor,
        data=f"SciFact train claims 1-{args.claims} (BEIR train qrels), {args.breadth} planned queries a claim, "
        f"BM25, Ret.R within the top {args.hits} hits of each query",
        pool_note=f"pool: {len(examples)} SciFact train claims (no LM needed)",
        max_tokens=512,
    )


def recorded_setup(args: argparse.Namespace, out: Path) -> Setup:
    from deepresearch.optimize.metrics import metric_spec
    from deepresearch.optimize.pools import stage_pool
    from deepresearch.optimize.targets import RecordedOnly
    from deepresearch.programs.config import preset
    from deepresearch.programs.research.program import DeepResearch
    from deepresearch.programs.stages.registry import STAGES

    folder = record_runs(Path(args.pool or out.with_suffix(".pool")), args.claims)
    config = preset("quick")
    full = DeepResearch(retriever=RecordedOnly(), config=config)
    attr = full.stage_table()[args.stage]
    examples = stage_pool(folder, args.stage, getattr(full, attr))
    trainset, devset = split_by_claim(examples, args.train, args.dev, args.seed, key="run")
    split = {x["run"] for x in trainset + devset}
    floor = getattr(DeepResearch(retriever=RecordedOnly(), config=config, offline=True), attr)
    return Setup(
        program=lambda: getattr(full, attr).deepcopy(),
        spec=metric_spec(args.stage, args.metric),
        trainset=trainset,
        devset=devset,
        floor=floor,
        data=f"{args.stage} calls of offline research runs (--preset quick) over SciFact train claims "
        f"1-{args.claims}; train and dev from disjoint runs; citation support by the lexical rule",
        pool_note=f"pool {folder}: {len(examples)} recorded {args.stage} calls",
        max_tokens=STAGES[args.stage].max_output_tokens,
        unused=[x for x in examples if x["run"] not in split],
    )


if __name__ == "__main__":
    sys.exit(main())
