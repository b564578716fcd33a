"""The research report end to end, against gold papers: cited-paper precision and recall, citation support, and
the sentences no reader wants (a structured abstract's section label, a cited paper's title alone, a sentence
said twice, a cited paper's sentence on its aim or methods), for the offline program and, with `--lm`, a real model side by side on the same questions.

Each question is a SciFact claim asked as a research question; its gold papers are the claim's qrels. The
metrics are `dr.metrics.cited_precision`, `cited_recall` and `citation_support` (the lexical rule over the
passages each sentence cites); precision and recall are also given over all questions' papers together.

    python -m benchmarks.report_quality --split test --questions 20 --out benchmarks/report_quality_offline.json
    python -m benchmarks.report_quality --split test --questions 10 --preset quick --lm openai/qwen05 \\
        --api-base http://127.0.0.1:8091/v1 --compile-train 8 --out benchmarks/report_quality_qwen05.json

With `--compile-train N`, the LM program is also compiled by DSPy's BootstrapFewShot on N SciFact *train*
claims (disjoint from the questions reported), the offline program teaching (`teacher=program.offline()`: no LM
call), with `dr.metrics.cited_recall`; every stage is the model's (no per-stage choice of the offline twin), and
the compiled program runs on the same questions, with paired bootstrap 95 % intervals against the uncompiled
program and the offline floor.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import platform
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dspy

import deepresearch as dr
from benchmarks._common import server_lm
from deepresearch.optimize.compile import paired_bootstrap
from deepresearch.programs.lm.models import SchemaAdapter
from deepresearch.programs.runtime.text import strip_label
from deepresearch.programs.stages.lexical import sentences as quotable_sentences
from deepresearch.programs.stages.writer import _words
from deepresearch.retrievers.passages import split_sentences


def unwanted(report, corpus) -> dict[str, int]:
    """Sentences of the report's body that only name a cited paper's title, start with or are a section label,
    say again what an earlier sentence said, or are a sentence of a cited paper that states its aim or methods
    (one the extractor does not offer as a finding: a structured abstract's "DESIGN" part, "We aimed to ...")."""
    body = report.markdown.split("\n## References")[0]
    titles = {_words(r.title) for r in report.references if r.title}
    study = set()
    for r in report.references:
        text = corpus.get(r.doc_id).text
        offered = {_words(t) for t in quotable_sentences(text)}
        said = {_words(t) for s in split_sentences(text) if len(t := strip_label(s)) >= 25}
        study |= said - offered
    counts, seen = {"title": 0, "label": 0, "repeated": 0, "study": 0, "sentences": 0}, set()
    for line in body.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", ">", "|", "*Extractive")):
            continue
        for sentence in split_sentences(line.lstrip("-* ")):
            words = _words(sentence)
            if not words:
                continue
            counts["sentences"] += 1
            counts["title"] += words in titles
            counts["label"] += strip_label(sentence.strip("*_ ")) != sentence.strip("*_ ")
            counts["repeated"] += words in seen and len(words) >= 25
            counts["study"] += words in study
            seen.add(words)
    return counts


def score(program: dr.DeepResearch, x: dspy.Example) -> dict:
    out = program(question=x.question)
    cited = [r.doc_id for r in out.references]
    return {
        "query_id": x.query_id,
        "status": out.status,
        "cited": cited,
        "gold": list(x.relevant_ids),
        "precision": dr.metrics.cited_precision(x, out),
        "recall": dr.metrics.cited_recall(x, out),
        "support": dr.metrics.citation_support(x, out) if cited else 0.0,
        "lm_calls": out.stats.lm_calls,
        "twin_answers": out.stats.twin_answers,
        **unwanted(out.report, program.retriever.corpus),
        "markdown": out.markdown,  # to read what the counts count
    }


def run(program: dr.DeepResearch, questions: list[dspy.Example], jobs: int = 1) -> dict:
    """Each question researched and scored; `jobs` questions at a time (a program serves concurrent runs, and a
    local server with several slots batches their requests), the rows in the questions' order."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        # each worker starts from this thread's context, so dspy.context's LM and adapter reach it
        futures = [pool.submit(contextvars.copy_context().run, score, program, x) for x in questions]
        rows = [f.result() for f in futures]
    n = len(rows)
    cited = sum(len(r["cited"]) for r in rows)
    hits = sum(len(set(r["cited"]) & set(r["gold"])) for r in rows)
    gold = sum(len(r["gold"]) for r in rows)
    return {
        "precision": sum(r["precision"] for r in rows) / n,
        "recall": sum(r["recall"] for r in rows) / n,
        "pooled_precision": hits / cited if cited else 0.0,
        "pooled_recall": hits / gold if gold else 0.0,
        "citation_support": sum(r["support"] for r in rows) / n,
        "cited_papers": cited,
        "gold_papers_cited": hits,
        **{k: sum(r[k] for r in rows) for k in ("sentences", "title", "label", "repeated", "study", "lm_calls")},
        "statuses": {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})},
        "seconds": round(time.perf_counter() - started, 1),
        "questions": rows,
    }


def compile_on_train(program: dr.DeepResearch, args: argparse.Namespace, report: dict) -> dr.DeepResearch:
    """`program` compiled by BootstrapFewShot on `--compile-train` SciFact train claims, the offline program
    teaching; what it took is recorded in `report["compile"]`."""
    train = dr.examples("scifact", "train")
    random.Random(args.seed).shuffle(train)
    train = train[: args.compile_train]
    calls, started = len(dspy.settings.lm.history), time.perf_counter()
    optimizer = dspy.BootstrapFewShot(
        metric=dr.metrics.cited_recall,
        metric_threshold=args.min_score,
        max_bootstrapped_demos=args.demos,
        max_labeled_demos=0,
        max_rounds=1,
    )
    compiled = optimizer.compile(program, teacher=program.offline(), trainset=train)
    report["compile"] = {
        "train": f"{len(train)} SciFact train claims (seed {args.seed}), disjoint from the questions",
        "train_ids": [x.query_id for x in train],
        "min_score": args.min_score,
        "lm_calls": len(dspy.settings.lm.history) - calls,
        "seconds": round(time.perf_counter() - started, 1),
        "demos": {n: len(p.demos) for n, p in compiled.named_predictors() if p.demos},
    }
    return compiled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="test", help="SciFact claims: test (held out) or train")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default="standard")
    parser.add_argument("--lm", default=None, help="also run with this model, on the same questions")
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--lm-timeout", type=float, default=900.0)
    parser.add_argument("--compile-train", type=int, default=0, help="also compile on this many train claims")
    parser.add_argument("--demos", type=int, default=1, help="bootstrapped demonstrations per predictor")
    parser.add_argument(
        "--min-score",
        type=float,
        default=1.0,
        help="the teacher's recall on a training claim for its trace to become a demonstration (DSPy's "
        "metric_threshold); 1.0 keeps only claims whose gold papers the offline program cited all of",
    )
    parser.add_argument(
        "--reuse",
        default=None,
        help="a results file of an earlier run on the same questions: its uncompiled model's row is taken, and "
        "only the offline program and the compiled one run",
    )
    parser.add_argument("--jobs", type=int, default=1, help="questions researched at a time")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    questions = dr.examples("scifact", args.split)
    random.Random(args.seed).shuffle(questions)
    questions = questions[: args.questions]
    retriever = dr.open_retriever("scifact").retriever
    config = dr.preset(args.preset, lm_timeout_s=args.lm_timeout)
    report = {
        "benchmark": "report_quality",
        "command": "python -m benchmarks.report_quality " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "split": f"{len(questions)} SciFact {args.split} claims asked as questions (seed {args.seed})",
        "preset": args.preset,
        "offline": run(dr.DeepResearch(retriever=retriever, config=config, offline=True), questions, args.jobs),
    }
    out = Path(args.out)
    out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    names = ["offline"]
    if args.lm:
        lm = server_lm(args.lm, args.api_base, args.lm_timeout)
        program = dr.DeepResearch(retriever=retriever, config=config)
        earlier = json.loads(Path(args.reuse).read_text(encoding="utf-8")) if args.reuse else None
        with dspy.context(lm=lm, adapter=SchemaAdapter() if args.api_base else None):
            if earlier is not None:
                asked = [r["query_id"] for r in earlier[args.lm]["questions"]]
                if asked != [x.query_id for x in questions]:
                    raise SystemExit(f"{args.reuse} was measured on other questions; rerun without --reuse")
                report[args.lm] = {**earlier[args.lm], "from": args.reuse, "command": earlier["command"]}
            else:
                report[args.lm] = run(program, questions, args.jobs)
            names.append(args.lm)
            out.write_text(json.dumps(report, indent=2), encoding="utf-8")
            if args.compile_train:
                compiled = compile_on_train(program, args, report)
                report[f"{args.lm} compiled"] = run(compiled, questions, args.jobs)
                names.append(f"{args.lm} compiled")
                for metric in ("precision", "recall"):
                    tuned = [r[metric] for r in report[f"{args.lm} compiled"]["questions"]]
                    for base in ("offline", args.lm):
                        before = [r[metric] for r in report[base]["questions"]]
                        report.setdefault("compiled_ci95", {})[f"{metric} vs {base}"] = paired_bootstrap(before, tuned)
                out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    for name in names:
        if name in report:
            r = report[name]
            print(
                f"{name}: precision {r['pooled_precision']:.3f} recall {r['pooled_recall']:.3f} (pooled), "
                f"support {r['citation_support']:.3f}; sentences {r['sentences']}: title {r['title']}, "
                f"label {r['label']}, repeated {r['repeated']}, aim or methods {r.get('study', 'not counted')}; "
                f"{r['seconds']} s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
