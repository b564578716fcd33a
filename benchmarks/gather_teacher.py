"""The gathering program end to end with a real model, before and after DSPy's BootstrapFewShot compiles it
with the offline program as teacher (`teacher=gatherer.offline()`: demonstrations without an LM call).

On a dev split of SciFact claims disjoint from the training claims, it scores three programs with DSPy's
`Evaluate` and `dr.metrics.gather_f1`: the offline floor, the uncompiled gatherer and the compiled one, each
answering every stage with its own means (no per-stage choice). It records, per program, loop F1 (mean of the
per-claim F1), queries that failed (the released scorer's rule: nothing selected, or a first plan with no valid
action), LM calls and seconds, with paired bootstrap 95 % intervals of compiled against uncompiled and against
the floor. Results go to `--out` after each program, so an interrupted run keeps what it measured.

    python -m benchmarks.gather_teacher --lm openai/qwen05 --api-base http://127.0.0.1:8091/v1 \\
        --train 12 --dev 30 --iterations 1 --demos 3 --min-score 1.0 --out benchmarks/gather_teacher_qwen05.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import dspy

import deepresearch as dr
from benchmarks._common import server_lm
from deepresearch.optimize.compile import paired_bootstrap
from deepresearch.optimize.metrics import gather_f1
from deepresearch.programs.lm.models import SchemaAdapter


def split(n_train: int, n_dev: int, seed: int) -> tuple[list[dspy.Example], list[dspy.Example]]:
    """Training claims from SciFact's train split, dev claims from its test split: disjoint by construction."""
    train, dev = dr.examples("scifact", "train"), dr.examples("scifact", "test")
    random.Random(seed).shuffle(train)
    random.Random(seed + 1).shuffle(dev)
    return train[:n_train], dev[:n_dev]


def score(program: dspy.Module, devset: list[dspy.Example], workers: int, calls) -> dict:
    """Per-claim F1 and failures of `program` on `devset`, with the LM calls and seconds it took."""
    started, before = time.perf_counter(), calls()
    with dr.one_run_per_example():  # a claim still running after 120 s is not started a second time
        result = dspy.Evaluate(devset=devset, metric=gather_f1, num_threads=workers, max_errors=len(devset) + 1)(
            program
        )
    scores, failed, no_round = [], [], []
    for _, pred, value in result.results:
        scores.append(float(value))
        run = pred.get("result") if hasattr(pred, "get") else None
        failed.append(run is None or run.is_failed)
        no_round.append(run is None or not run.rounds)
    return {
        "f1": sum(scores) / len(scores),
        "failed_queries": sum(failed),
        "no_round_run": sum(no_round),
        "lm_calls": calls() - before,
        "seconds": round(time.perf_counter() - started, 1),
        "scores": scores,
        "failed": failed,
        "no_round": no_round,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm", required=True)
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--train", type=int, default=12)
    parser.add_argument("--dev", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=1, help="rounds of the loop (T)")
    parser.add_argument("--demos", type=int, default=1, help="bootstrapped demonstrations per predictor")
    parser.add_argument(
        "--min-score",
        type=float,
        default=1.0,
        help="the teacher's F1 on a training claim for its trace to become a demonstration (DSPy's "
        "metric_threshold); 1.0 keeps only claims the offline program got entirely right",
    )
    parser.add_argument("--workers", type=int, default=2, help="claims evaluated at once (the server's slots)")
    parser.add_argument("--lm-timeout", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reuse",
        default=None,
        help="a results file of an earlier run on the same split: its uncompiled scores are taken for the first "
        "--dev claims, and only the offline floor (no LM) and the compiled program run",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    out = Path(args.out)
    train, dev = split(args.train, args.dev, args.seed)
    retriever = dr.open_retriever("scifact").retriever
    lm = server_lm(args.lm, args.api_base, args.lm_timeout, num_retries=1)
    calls = lambda: len(lm.history)  # noqa: E731
    report = {
        "benchmark": "gather_teacher",
        "lm": args.lm,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs; the LM on llama-server (2 slots, 2 threads)",
        "command": "python -m benchmarks.gather_teacher " + " ".join(argv if argv is not None else sys.argv[1:]),
        "split": {
            "train": f"{len(train)} SciFact train claims (seed {args.seed})",
            "dev": f"{len(dev)} SciFact test claims (seed {args.seed + 1}), disjoint from train",
            "train_ids": [x.query_id for x in train],
            "dev_ids": [x.query_id for x in dev],
        },
        "iterations": args.iterations,
        "demos": args.demos,
        "min_score": args.min_score,
    }

    def save() -> None:
        out.write_text(json.dumps(report, indent=2), encoding="utf-8")

    gatherer = dr.Gatherer(retriever, dr.GatherConfig(iterations=args.iterations, lm_timeout_s=args.lm_timeout))
    earlier = json.loads(Path(args.reuse).read_text(encoding="utf-8")) if args.reuse else None
    if earlier is not None:  # the same seeded split: its first --dev claims are this run's dev claims
        if earlier["split"]["dev_ids"][: len(dev)] != report["split"]["dev_ids"]:
            raise SystemExit(f"{args.reuse} was measured on another split; rerun without --reuse")
        for name in ("uncompiled",):
            kept = {k: earlier[name][k][: len(dev)] for k in ("scores", "failed", "no_round") if k in earlier[name]}
            whole = len(earlier[name]["scores"]) == len(dev)  # its own counts hold for these claims
            counts = {
                k: sum(kept[f]) if f in kept else (earlier[name].get(k) if whole else None)
                for k, f in (("failed_queries", "failed"), ("no_round_run", "no_round"))
            }
            f1 = sum(kept["scores"]) / len(dev)
            report[name] = {**earlier[name], **kept, **counts, "f1": f1, "from": args.reuse}
    report["offline_floor"] = score(gatherer.offline(), dev, 1, calls)
    save()
    with dspy.context(lm=lm, adapter=SchemaAdapter() if args.api_base else None):
        if earlier is None:
            report["uncompiled"] = score(gatherer, dev, args.workers, calls)
            save()
        before, started = calls(), time.perf_counter()
        teacher = dspy.BootstrapFewShot(
            metric=gather_f1,
            metric_threshold=args.min_score,
            max_bootstrapped_demos=args.demos,
            max_labeled_demos=0,
            max_rounds=1,
        )
        compiled = teacher.compile(gatherer, teacher=gatherer.offline(), trainset=train)
        report["compile"] = {
            "lm_calls": calls() - before,
            "seconds": round(time.perf_counter() - started, 1),
            "demos": {n: len(p.demos) for n, p in compiled.named_predictors()},
        }
        compiled.save(str(out.with_suffix(".program.json")))
        report["compiled"] = score(compiled, dev, args.workers, calls)
    floor, base, tuned = (report[k]["scores"] for k in ("offline_floor", "uncompiled", "compiled"))
    report["compiled_vs_uncompiled_ci95"] = paired_bootstrap(base, tuned)
    report["compiled_vs_floor_ci95"] = paired_bootstrap(floor, tuned)
    save()
    for name in ("offline_floor", "uncompiled", "compiled"):
        r = report[name]
        print(
            f"{name}: F1 {r['f1']:.3f}, failed {r['failed_queries']}/{len(dev)}, LM calls {r['lm_calls']}, {r['seconds']} s"
        )
    print(
        f"compiled vs uncompiled: {report['compiled_vs_uncompiled_ci95']}; vs floor: {report['compiled_vs_floor_ci95']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
