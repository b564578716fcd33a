"""`deepresearch optimize`: compile a program (or one stage) against a benchmark metric and save it."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from pathlib import Path

import dspy

from optimize.compile import OPTIMIZERS, compile_program
from optimize.metrics import METRICS, metric_spec
from optimize.saved import save_compiled
from optimize.targets import record_candidates, research_target
from optimize.trainsets import (candidates_from_jsonl, candidates_to_jsonl, fingerprint, from_beir, from_jsonl,
                                split_dev)
from programs.config import PRESETS, preset
from programs.lm import make_lm
from programs.research import STAGES, DeepResearch

PROGRAMS = ("research",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--program", default="research", choices=PROGRAMS, help="the program to compile")
    parser.add_argument("--stage", default="all", choices=("all", *STAGES),
                        help="tune one stage (planner and assessor run on cheap frozen inputs) or all")
    parser.add_argument("--metric", required=True,
                        help="; ".join(f"{t}: {', '.join(m)}" for t, m in METRICS.items()))
    parser.add_argument("--optimizer", default="gepa", choices=OPTIMIZERS)
    parser.add_argument("--train", required=True,
                        help="a BEIR folder (queries + qrels), a JSONL of questions, or recorded assessor candidates")
    parser.add_argument("--split", default="train", help="qrels split of a BEIR --train folder")
    parser.add_argument("--dev", default=None, help="dev examples (same forms as --train); default: 30%% of --train")
    parser.add_argument("--dev-split", default=None, help="qrels split of a BEIR --dev folder (default: --split)")
    parser.add_argument("--limit", type=int, default=None, help="use at most this many training questions")
    parser.add_argument("--corpus", default=None, help="corpus to research over (default: the --train folder)")
    parser.add_argument("--budget", type=int, default=100, help="metric calls the optimizer may spend")
    parser.add_argument("--max-lm-calls", type=int, default=None, help="LM calls the whole run may spend")
    parser.add_argument("--lm", default=None, help="task LM (default $DEEPRESEARCH_LM); offline cannot be tuned")
    parser.add_argument("--prompt-lm", default=None, help="LM that proposes instructions (default: --lm)")
    parser.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible server")
    parser.add_argument("--preset", default="quick", choices=sorted(PRESETS))
    parser.add_argument("--depth", type=int, default=None)
    parser.add_argument("--breadth", type=int, default=None)
    parser.add_argument("--record-candidates", default=None,
                        help="where to write the assessor candidates recorded from --train (reused with --train)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="compiled program file (JSON)")


def _is_candidates(path: str) -> bool:
    p = Path(path)
    if not p.is_file():
        return False
    with p.open(encoding="utf-8") as f:
        return '"sources"' in f.readline()


def _examples(source: str, split: str, corpus, limit: int | None):
    examples = from_beir(source, split, corpus) if Path(source).is_dir() else from_jsonl(source)
    return examples[:limit] if limit else examples


def main(args: argparse.Namespace) -> int:
    from programs.cli import resolve_corpus
    from retrievers.bm25 import BM25Retriever

    model = args.lm or os.environ.get("DEEPRESEARCH_LM")
    if not model or model == "offline":
        raise ValueError("optimization tunes LM prompts; pass --lm (any DSPy/LiteLLM model string)")
    api_key = os.environ.get("DEEPRESEARCH_API_KEY")
    lm = make_lm(model, args.api_base, api_key)
    prompt_lm = make_lm(args.prompt_lm, args.api_base, api_key) if args.prompt_lm else lm
    kind = args.stage if args.stage in ("planner", "assessor") and args.metric in METRICS[args.stage] else "program"
    spec = metric_spec(args.program if kind == "program" else kind, args.metric)

    corpus_spec = args.corpus or (args.train if Path(args.train).is_dir() else None)
    if corpus_spec is None:
        raise ValueError("pass --corpus: the research program needs documents to search")
    corpus = resolve_corpus(corpus_spec)
    overrides = {k: v for k, v in {"depth": args.depth, "breadth": args.breadth}.items() if v is not None}
    full = DeepResearch(retriever=BM25Retriever(corpus), config=preset(args.preset, **overrides))
    target = research_target(full, args.stage, kind)

    with dspy.context(lm=lm):
        if kind == "assessor":
            if _is_candidates(args.train):
                examples = candidates_from_jsonl(args.train)
            else:
                questions = _examples(args.train, args.split, corpus, args.limit)
                print(f"recording assessor candidates from {len(questions)} questions", file=sys.stderr)
                examples = asyncio.run(record_candidates(full, questions))
                path = Path(args.record_candidates or Path(args.out).with_suffix(".candidates.jsonl"))
                candidates_to_jsonl(examples, path)
                print(f"candidates: {path}", file=sys.stderr)
            trainset, devset = split_dev(examples, seed=args.seed)
        else:
            trainset = _examples(args.train, args.split, corpus, args.limit)
            if args.dev:
                devset = _examples(args.dev, args.dev_split or args.split, corpus, None)
            else:
                trainset, devset = split_dev(trainset, seed=args.seed)
        result = compile_program(target.program, optimizer=args.optimizer, spec=spec, trainset=trainset,
                                 devset=devset, budget=args.budget, max_lm_calls=args.max_lm_calls,
                                 prompt_lm=prompt_lm, num_threads=args.threads, seed=args.seed,
                                 show_progress=sys.stderr.isatty())
    target.program = result.program
    final = target.finish()
    meta = {"program": args.program, "stage": args.stage, "metric": spec.name, "optimizer": args.optimizer,
            "before": result.before, "after": result.after, "metric_budget": result.metric_budget,
            "lm_calls": result.lm_calls, "lm": model, "n_train": result.n_train, "n_dev": result.n_dev,
            "trainset": fingerprint(trainset), "config": dataclasses.asdict(full.config)}
    path = save_compiled(final, args.out, meta)
    print(result.table())
    print(f"compiled: {path}  (LM calls: {result.lm_calls})")
    return 0
