"""`deepresearch run`: research one question over a corpus and write report.md and trace.json."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path

from programs.config import PRESETS, preset
from programs.research.program import STAGES, DeepResearch, tree_size
from programs.runtime.events import Event
from programs.runtime.lm_cli import LMSession, add_lm_arguments, open_lm
from programs.runtime.secrets import redact

EXIT_FAILED = 3  # the run produced nothing because of failures (distinct from 2, bad input)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the research question")
    parser.add_argument("--corpus", required=True,
                        help="a JSONL file, a BEIR folder, or a dataset name found under $DEEPRESEARCH_DATA "
                             "(e.g. scifact) or on the Hugging Face hub (e.g. BeIR/scifact)")
    parser.add_argument("--stage-lm", action="append", default=[], metavar="STAGE=MODEL",
                        help=f"an LM for one stage ({', '.join(STAGES)}); repeatable")
    parser.add_argument("--preset", default="standard", choices=sorted(PRESETS), help="tree shape preset")
    parser.add_argument("--depth", type=int, default=None, help="levels of search (overrides the preset)")
    parser.add_argument("--breadth", type=int, default=None, help="tasks planned at the root (overrides the preset)")
    parser.add_argument("--hits", type=int, default=None, help="documents retrieved per search")
    parser.add_argument("--concurrency", type=int, default=None, help="nodes working at once")
    parser.add_argument("--deadline", type=float, default=None, help="wall-clock seconds; then write what exists")
    parser.add_argument("--max-lm-calls", type=int, default=None, help="stop researching after this many LM calls")
    parser.add_argument("--max-tokens", type=int, default=None, help="stop researching after this many tokens")
    parser.add_argument("--program", default=None, help="a compiled program (JSON state) to load")
    parser.add_argument("--out", default=None, help="output folder (default runs/<question-slug>)")
    parser.add_argument("--no-progress", action="store_true", help="do not draw a progress bar")
    add_lm_arguments(parser)


def slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "run"


def resolve_corpus(spec: str):
    """Loads the corpus named by `spec`: a path, a folder under $DEEPRESEARCH_DATA, or a hub dataset."""
    from retrievers.corpus import CorpusError, load_corpus

    path = Path(spec).expanduser()
    if path.exists():
        return load_corpus(path)
    data = os.environ.get("DEEPRESEARCH_DATA")
    name = spec.split("/")[-1].lower()
    if data and (Path(data) / name).exists():
        return load_corpus(Path(data) / name)
    if "/" in spec and not spec.startswith((".", "/", "~")):
        from retrievers.hf import load_hf_corpus

        return load_hf_corpus(spec)
    raise CorpusError(f"corpus not found: {spec}; pass a JSONL file, a BEIR folder, a dataset under "
                      f"$DEEPRESEARCH_DATA, or a Hugging Face dataset name")


def parse_stage_lms(items: list[str]) -> dict[str, str]:
    """`--stage-lm STAGE=MODEL` options as a mapping, checked before any LM is built."""
    models = {}
    for item in items:
        stage, _, stage_model = item.partition("=")
        if stage not in STAGES or not stage_model:
            raise ValueError(f"--stage-lm {item!r} should be STAGE=MODEL with STAGE one of: {', '.join(STAGES)}")
        models[stage] = stage_model
    return models


def build_program(args: argparse.Namespace, retriever, on_event, session: LMSession) -> tuple[DeepResearch, dict]:
    overrides = {k: v for k, v in {"depth": args.depth, "breadth": args.breadth, "hits_per_query": args.hits,
                                   "max_concurrency": args.concurrency, "deadline_s": args.deadline,
                                   "max_lm_calls": args.max_lm_calls, "max_tokens": args.max_tokens,
                                   "lm_timeout_s": args.lm_timeout}.items()
                 if v is not None}
    config = preset(args.preset, **overrides)
    program = DeepResearch(retriever=retriever, config=config, offline=session.is_offline,
                           lms=session.stage_lms or None, on_event=on_event)
    if args.program:
        if session.is_offline:
            raise ValueError("--program needs an LM: a compiled program tunes LM prompts; pass --lm")
        program.load(args.program)
    return program, {"models": session.models(), "config": dataclasses.asdict(config)}


class Progress:
    """Draws a bar from node events; the total is the largest tree the configuration allows."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="search", desc="researching", file=sys.stderr, leave=False)
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if self.bar is not None and event.kind == "node_end":
            self.bar.update(1)
            self.bar.set_postfix_str(event.message)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def write_trace(out: Path, payload: dict) -> Path:
    path = out / "trace.json"
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    return path


def main(args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise ValueError("question is empty; pass the research question in quotes")
    preset(args.preset, **{k: v for k, v in {"depth": args.depth, "breadth": args.breadth}.items() if v is not None})
    stage_models = parse_stage_lms(args.stage_lm)
    # the LM is checked before the corpus is loaded: a bad key or a dead server fails in seconds
    session = open_lm(args, num_retries=0, stage_models=stage_models)  # the run's scheduler retries, and counts
    corpus = resolve_corpus(args.corpus)
    from retrievers.bm25 import BM25Retriever

    retriever = BM25Retriever(corpus)
    out = Path(args.out or Path("runs") / slug(args.question))
    out.mkdir(parents=True, exist_ok=True)
    progress = Progress(total=1, enabled=not args.no_progress and sys.stderr.isatty())
    program, meta = build_program(args, retriever, progress, session)
    if progress.bar is not None:
        progress.bar.total = tree_size(program.config)[0]
    started = time.time()
    trace = {"question": args.question, "corpus": {"name": corpus.name, "documents": len(corpus)},
             "models": meta["models"], "config": meta["config"], "structured": args.structured,
             "started": started}
    try:
        with session.context():
            result = program(question=args.question)
    except BaseException as err:  # keep what exists: the events so far, and the error
        progress.close()
        trace.update(status="error", error=redact(f"{type(err).__name__}: {err}"),
                     events=[dataclasses.asdict(e) for e in progress.events])
        write_trace(out, trace)
        raise
    progress.close()
    report = result.report
    (out / "report.md").write_text(report.markdown, encoding="utf-8")
    trace.update(seconds=round(time.time() - started, 2), **report.to_dict())
    write_trace(out, trace)
    s = report.stats
    print(f"report: {out / 'report.md'}")
    print(f"trace:  {out / 'trace.json'}")
    print(f"nodes {s['nodes']} · searches {s['searches']} · learnings {s['learnings']} · "
          f"citations {s['citations']} · failed branches {s['failed_nodes']} · LM requests {s['lm_calls']}")
    if report.status == "failed":
        print(f"deepresearch run: error: {report.error}", file=sys.stderr)
        return EXIT_FAILED
    return 0
