"""`deepresearch run`: research one question over a corpus and write report.md and trace.json.

Every finished node is appended to `--out/journal.jsonl`, and trace.json is rewritten as nodes finish,
so a reader always sees a valid, current trace. SIGINT or SIGTERM stops the running work, writes the
report of what exists (its first line says it was interrupted) and exits 130 or 143; a second signal
stops at once. `--resume` runs again only what the journal does not hold.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import (
    add_output_arguments,
    add_overwrite_argument,
    add_tree_arguments,
    add_workers_arguments,
    deprecated,
)
from deepresearch.programs.config import VERIFY_POLICIES
from deepresearch.programs.runtime.files import RUN_FILES, STAGE_LOG
from deepresearch.programs.stages.names import MAX_QUESTIONS, RESEARCH_STAGES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s QUESTION [--corpus SPEC] [--lm MODEL] [--preset NAME] [--out DIR] [options]"
    # Grouped for --help: what most runs set first, then retrieval, the LM, budgets, and what is written.
    everyday = parser.add_argument_group("everyday options")
    everyday.add_argument("question", help="the research question")

    # --corpus (everyday); --index, --retriever, --qdrant-url, BM25 and dense settings (retrieval)
    retrieval = add_retriever_arguments(parser, everyday=everyday)
    lm = add_lm_arguments(parser, everyday=everyday)  # --lm (everyday); --api-base, --structured ... (language model)
    add_tree_arguments(
        everyday,
        preset_default="standard",
        preset_help="how the research tree grows: standard (the default, depth 2 x breadth 3), quick "
        "(1 x 2), deep (4 x 4), eco, hero, parallel, gather (deepresearch --help describes "
        "each); --depth and --breadth override its size",
        breadth_help="tasks planned at the root (overrides the preset; with --preset parallel, the "
        "most subqueries a node plans)",
    )
    add_output_arguments(
        everyday, out_help="output folder (default runs/<question-slug>); one run at a time, one question per folder"
    )
    retrieval.add_argument("--hits", type=int, default=None, help="documents retrieved per search")
    retrieval.add_argument(
        "--full-text",
        action="store_true",
        help="where a hit has an open-access PDF link (search engines give one), fetch and read "
        "the PDF (cached under ~/.cache/dspy-deepresearch/fulltext or --full-text-cache) and "
        "give the extractor its passages that best match the query instead of the abstract",
    )
    retrieval.add_argument("--full-text-cache", default=None, metavar="DIR", help="folder of fetched PDFs")
    lm.add_argument(
        "--stage-lm",
        action="append",
        default=[],
        metavar="STAGE=MODEL",
        help=f"an LM for one stage ({', '.join(RESEARCH_STAGES)}), or `offline` for its offline twin "
        "(`--stage-lm plan=offline`: the offline planner, the LM everywhere else); repeatable",
    )
    lm.add_argument("--program", default=None, help="a compiled program (JSON state) to load")
    # clarifying questions
    lm.add_argument(
        "--clarify",
        action="store_true",
        help=f"before research, the LM asks up to {MAX_QUESTIONS} clarifying questions on the "
        f"terminal (Enter skips one); the answers join the question in the research brief and "
        f"trace.json records them. Without a terminal (or offline) nothing is asked",
    )
    lm.add_argument(
        "--clarify-answers",
        default=None,
        metavar="FILE",
        help='answers given in advance, nothing asked: a JSON list of {"question": ..., '
        '"answer": ...} (as trace.json records them; a trace.json works too) or text lines '
        "'Q: <question>' each followed by 'A: <answer>'; blank answers are left out. "
        "--resume keeps the answers the run's trace.json recorded",
    )
    budgets = parser.add_argument_group("budgets", "when research stops; the report of what exists is still written")
    budgets.add_argument("--deadline", type=float, default=None, help="wall-clock seconds; then write what exists")
    budgets.add_argument("--max-lm-calls", type=int, default=None, help="stop researching after this many LM calls")
    budgets.add_argument("--max-tokens", type=int, default=None, help="stop researching after this many tokens")
    add_workers_arguments(budgets, help="nodes working at once", old=("--concurrency",))
    output = parser.add_argument_group("output", "what the run writes beside report.md and trace.json, and where")
    # deliverables beside the report
    output.add_argument(
        "--answer", action="store_true", help="also write a short cited answer (a few sentences) to answer.md"
    )
    output.add_argument(
        "--taxonomy",
        action="store_true",
        help="also organise the papers judged relevant into a taxonomy: taxonomy.json (TaxoBench "
        "JSON) and a 'Map of the literature' section of the report",
    )
    # exports
    output.add_argument(
        "--bibtex",
        action="store_true",
        help="also write references.bib: the report's references as BibTeX (title, authors, year, "
        "venue, DOI or URL where the corpus has them)",
    )
    output.add_argument(
        "--ris",
        action="store_true",
        help="also write references.ris: the same references as RIS, for Zotero, EndNote or Mendeley",
    )
    output.add_argument(
        "--verify",
        default=None,
        choices=VERIFY_POLICIES,
        help="check every claim of the draft against the passages it cites and rewrite (default), "
        "remove or mark what they do not support; off skips the check. trace.json records "
        "each verdict",
    )
    add_overwrite_argument(
        output, help=f"replace a run of another question in --out (removes its {', '.join(RUN_FILES)})"
    )
    output.add_argument(
        "--resume",
        action="store_true",
        help="continue the run of this question in --out: nodes its journal.jsonl holds are "
        "restored, not researched again (no LM call, no search)",
    )
    deprecated(output, "--no-progress", "-q", dest="quiet", action="store_true")  # the dispatcher's -q
    output.add_argument(
        "--stage-log",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"record every stage call's inputs and outputs in --out/{STAGE_LOG}, the training pool "
        f"of `optimize --from-runs` (default: on with an LM, off with --lm offline, whose "
        f"trees can grow to thousands of nodes)",
    )


def main(args: argparse.Namespace) -> int:
    from deepresearch.cli.research_run import (  # lazy: start-up
        needed_extras,
        parse_stage_lms,
        run_config,
        run_research,
        slug,
    )
    from deepresearch.programs.lm.session import open_lm  # lazy: start-up
    from deepresearch.programs.retrieval import data_dir, open_from_args  # lazy: start-up
    from deepresearch.programs.runtime.outputs import check_out_folder, open_run, out_folder_lock  # lazy: start-up
    from deepresearch.programs.runtime.text import printable  # lazy: start-up
    from deepresearch.programs.stages.clarifier import ClarificationsError, read_clarifications  # lazy: start-up
    from deepresearch.retrievers.extras import check_extras  # lazy: start-up
    from deepresearch.retrievers.sources import DEFAULT_CORPUS, EMBEDDED, find_local  # lazy: start-up

    args.question = printable(args.question)  # terminal escape codes never reach a report or the trace
    if not args.question.strip():
        raise ValueError("question is empty; pass the research question in quotes")
    config = run_config(args)  # every setting checked before any LM call (nan included)
    stage_models = parse_stage_lms(args.stage_lm)
    answers = read_clarifications(args.clarify_answers) if args.clarify_answers else None  # before any LM call
    # the LM is checked before the corpus is loaded: a bad key or a dead server fails in seconds
    session = open_lm(args, num_retries=0, stage_models=stage_models)  # the run's scheduler retries, and counts
    if args.resume and args.overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite removes it; pass one of them")
    if args.out is not None and not args.out.strip():
        raise ValueError("--out is empty; pass a folder, or leave --out out for runs/<question-slug>")
    if args.corpus is None and args.index is None and not args.source:
        args.corpus = DEFAULT_CORPUS  # said in one line, as the offline notice is: the report's sources depend on it
        local = find_local(DEFAULT_CORPUS, data_dir())
        where = (
            "the embedded SciFact demo corpus"
            if local is not None and EMBEDDED in local.parents
            else "the SciFact corpus under $DEEPRESEARCH_DATA"
        )
        print(
            f"deepresearch run: no --corpus given; searching {where} (5,183 biomedical abstracts, --corpus "
            f"{DEFAULT_CORPUS})",
            file=sys.stderr,
        )
    check_extras(needed_extras(args, config))  # a missing extra fails here, not after the research
    out = Path(args.out or Path("runs") / slug(args.question))
    with out_folder_lock(out):  # a second run into the same folder stops here, at once
        check_out_folder(out, args.question, overwrite=args.overwrite)  # before the corpus: bad input fails fast
        if args.resume and answers is None and (out / "trace.json").exists():  # the journal's brief holds them
            with contextlib.suppress(ClarificationsError):  # a trace of a run before clarifications: none kept
                answers = read_clarifications(out / "trace.json")

        retrieval = open_from_args(args)  # a corpus spec or a memory-mapped index (retrievers/open.py)
        with open_run(out, args.question, overwrite=args.overwrite) as folder:  # nothing is removed before this
            return run_research(args, session, retrieval, folder, answers)
