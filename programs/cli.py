"""`deepresearch run`: research one question over a corpus and write report.md and trace.json.

Every finished node is appended to `--out/journal.jsonl`, and trace.json is rewritten as nodes finish,
so a reader always sees a valid, current trace. SIGINT or SIGTERM stops the running work, writes the
report of what exists (its first line says it was interrupted) and exits 130 or 143; a second signal
stops at once. `--resume` runs again only what the journal does not hold.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import re
import signal
import sys
import time
from pathlib import Path

from deepresearch.programs.artifacts import RAISED
from deepresearch.programs.cli_options import (
    add_output_arguments,
    add_overwrite_argument,
    add_quiet_alias,
    add_tree_arguments,
    add_workers_arguments,
)
from deepresearch.programs.config import PRESETS, VERIFY_POLICIES, ResearchConfig, preset
from deepresearch.programs.formats.exports import to_bibtex
from deepresearch.programs.lm.lm_cli import LMSession, add_lm_arguments, open_lm
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.report_view import report_html
from deepresearch.programs.research.program import DeepResearch, stage_names
from deepresearch.programs.runtime.context import Interrupt
from deepresearch.programs.runtime.events import Event, EventHandler
from deepresearch.programs.runtime.outputs import (
    RUN_FILES,
    RunFolder,
    check_out_folder,
    open_run,
    out_folder_lock,
)
from deepresearch.programs.runtime.progress import Progress
from deepresearch.programs.runtime.scheduler import CostMeter
from deepresearch.programs.runtime.stage_log import STAGE_LOG
from deepresearch.programs.runtime.text import printable
from deepresearch.programs.stages.clarifier import (
    MAX_QUESTIONS,
    ClarificationsError,
    read_clarifications,
    research_brief,
)
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.cli import add_retriever_arguments, data_dir, open_from_args
from deepresearch.retrievers.extras import EXTRAS, check_extras
from deepresearch.retrievers.sources import DEFAULT_CORPUS, EMBEDDED, find_local, resolve_source, source_extras

EXIT_FAILED = 3  # the run produced nothing because of failures (distinct from 2, bad input)
SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}  # the exit code of a run each signal interrupted (128 + n)
STAGE_NAMES = stage_names()  # the --stage-lm choices


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
        presets=tuple(sorted(PRESETS)),
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
        help=f"an LM for one stage ({', '.join(STAGE_NAMES)}), or `offline` for its offline twin "
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
    add_quiet_alias(output)
    output.add_argument(
        "--stage-log",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"record every stage call's inputs and outputs in --out/{STAGE_LOG}, the training pool "
        f"of `optimize --from-runs` (default: on with an LM, off with --lm offline, whose "
        f"trees can grow to thousands of nodes)",
    )


def slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "run"


def parse_stage_lms(items: list[str]) -> dict[str, str]:
    """`--stage-lm STAGE=MODEL` options as a mapping, checked before any LM is built."""
    models = {}
    for item in items:
        stage, _, stage_model = item.partition("=")
        if stage not in STAGE_NAMES or not stage_model:
            raise ValueError(f"--stage-lm {item!r} should be STAGE=MODEL with STAGE one of: {', '.join(STAGE_NAMES)}")
        models[stage] = stage_model
    return models


def run_config(args: argparse.Namespace) -> ResearchConfig:
    """The run's settings: the preset with the options given on the command line."""
    return preset(args.preset, **config_overrides(args))


def needed_extras(args: argparse.Namespace, config: ResearchConfig) -> dict[str, str]:
    """Every extra the run will need (extra -> what needs it), known from its options before any work."""
    needs: dict[str, str] = {}
    if args.index is None and args.corpus is not None:  # an index reads its own stored corpus
        needs.update(source_extras(resolve_source(args.corpus, data_dir=data_dir())))
    kind = args.retriever or ("qdrant" if getattr(args, "qdrant_url", None) else "bm25")
    if kind == "qdrant":
        needs["qdrant"] = EXTRAS["qdrant"][1]
    if kind in ("dense", "hybrid") or (kind == "qdrant" and getattr(args, "qdrant_mode", "hybrid") != "bm25"):
        needs["dense"] = EXTRAS["dense"][1]
    if config.taxonomy:
        needs["dense"] = "--taxonomy (it groups the papers by their embeddings)"
    elif config.strategy == "hero" and config.hero.selection == "submodular":
        needs["dense"] = "the hero preset (it selects tasks by their embeddings)"
    if config.full_text:
        needs["pdf"] = "--full-text (reading the fetched PDFs)"
    return needs


def build_program(args: argparse.Namespace, retriever, on_event, session: LMSession) -> tuple[DeepResearch, dict]:
    config = run_config(args)
    program = DeepResearch(
        retriever=retriever, config=config, offline=session.is_offline, lms=session.program_lms(), on_event=on_event
    )
    if args.program:
        if session.is_offline:
            raise ValueError("--program needs an LM: a compiled program tunes LM prompts; pass --lm")
        program.load(args.program)
    return program, {"models": session.models(), "config": config.to_dict()}


def config_overrides(args: argparse.Namespace) -> dict:
    """The options that override the preset's settings, as ResearchConfig fields (only those given)."""
    return {
        k: v
        for k, v in {
            "depth": args.depth,
            "breadth": args.breadth,
            "hits_per_query": args.hits,
            "max_concurrency": args.workers,
            "deadline_s": args.deadline,
            "max_lm_calls": args.max_lm_calls,
            "max_tokens": args.max_tokens,
            "lm_timeout_s": args.lm_timeout,
            "answer": args.answer or None,
            "taxonomy": args.taxonomy or None,
            "verify": args.verify,
            "full_text": args.full_text or None,
            "full_text_cache": args.full_text_cache,
            "structured": getattr(args, "structured", None),
        }.items()
        if v is not None
    }


def answer_markdown(report) -> str:
    """answer.md: the question, the short answer, and the references it cites (numbered as in the report)."""
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", report.answer)}
    refs = [r.render() for r in report.references if r.number in cited]
    lead = f"> {report.error}\n\n" if report.status != "done" and report.error else ""
    parts = [f"# {report.question}", lead + (report.answer or "No answer was written.")]
    if refs:
        parts.append("## References\n\n" + "\n".join(refs))
    return "\n\n".join(parts) + "\n"


def source_failures(retrieval) -> dict:
    """`source_failures` for the trace: each search a search engine failed (or skipped after failing) while the
    run went on with the other sources; nothing for a retriever without engines."""
    failures = getattr(retrieval.retriever, "failures", None)
    return {} if failures is None else {"source_failures": [redact_record(f) for f in list(failures)]}


def redact_record(record: dict) -> dict:
    return {k: redact(v) if isinstance(v, str) else v for k, v in record.items()}


def source_failure_lines(retrieval) -> list[str]:
    """One line per search engine that failed during the run: how many searches, and the first reason."""
    by_source: dict[str, list[dict]] = {}
    for f in getattr(retrieval.retriever, "failures", None) or ():
        by_source.setdefault(f["source"], []).append(f)
    return [
        f"{name}: {len(items)} search{'es' if len(items) > 1 else ''} failed "
        f"({redact(next((f['error'] for f in items if not f['skipped']), items[0]['error']))}); "
        f"see source_failures in trace.json"
        for name, items in by_source.items()
    ]


def recording(events: list[Event], progress: Progress, also: EventHandler | None = None) -> EventHandler:
    """An event handler that keeps every event (for the trace of a run that raised), shows it, and passes it
    on to `also` (another watcher of the run, such as `deepresearch mcp`'s progress notifications)."""

    def on_event(event: Event) -> None:
        events.append(event)
        progress(event)
        if also is not None:
            also(event)

    return on_event


def ask_clarifications(
    args: argparse.Namespace, program: DeepResearch, session: LMSession, meter: CostMeter
) -> tuple[dict[str, str], ...]:
    """`--clarify`: the LM's clarifying questions asked on the terminal, with the user's answers (blank
    ones included: the brief leaves them out, the trace keeps them).

    Asks nothing, saying why in one line on stderr, when the program is offline, when stdin or stdout is
    not a terminal, when the LM asks nothing, or when its call fails; research then goes on with the
    question as given. The call is counted in `meter`, the run's usage meter.
    """

    def skip(why: str) -> tuple[dict[str, str], ...]:
        print(f"deepresearch run: --clarify: {why}; researching the question as given", file=sys.stderr)
        return ()

    if session.is_offline:
        return skip("no clarifying questions offline (no LM to ask them); pass --clarify-answers FILE to add answers")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return skip(
            "no clarifying questions asked: stdin or stdout is not a terminal; pass --clarify-answers FILE "
            "to give answers without one"
        )
    try:
        with session.context():
            questions = program.clarify(args.question, meter=meter)
    except Exception as err:  # the run goes on; its usage counts the failed request
        return skip(f"the clarifying step failed ({redact(f'{type(err).__name__}: {err}'.splitlines()[0])[:200]})")
    if not questions:
        unparsed = meter.snapshot().get(STAGES.clarify.name)
        return skip(
            "the LM's reply did not parse (recorded in trace.json), so no question was asked"
            if unparsed and unparsed.parse_failures
            else "the LM found the question clear and asked nothing"
        )
    print(
        f"{len(questions)} clarifying question{'s' if len(questions) > 1 else ''} before research (Enter skips one):",
        flush=True,
    )
    answers = []
    for i, question in enumerate(questions, start=1):
        print(f"[{i}/{len(questions)}] {question}\n> ", end="", flush=True)  # input() may prompt on stderr
        try:
            answer = input()
        except EOFError:  # Ctrl-D: this and the remaining questions stay unanswered
            print(flush=True)
            answers += [{"question": q, "answer": ""} for q in questions[i - 1 :]]
            break
        answers.append({"question": question, "answer": answer.strip()})
    return tuple(answers)


def run_research(
    args: argparse.Namespace,
    session: LMSession,
    retrieval,
    folder: RunFolder,
    answers: tuple[dict[str, str], ...] | None = None,
    on_event: EventHandler | None = None,
) -> int:
    """Runs the program into a claimed folder: report.md and trace.json, also the trace of a run that raised.

    `answers` are clarifications given in advance (`--clarify-answers`); without them `--clarify` asks.
    `on_event` is called with every event of the run, after the progress display.
    """
    progress = Progress(quiet=getattr(args, "quiet", False))  # -q is the dispatcher's option
    events: list[Event] = []
    program, meta = build_program(args, retrieval.retriever, recording(events, progress, on_event), session)
    meter = CostMeter()  # the run's usage: the clarifying questions are counted in it too
    clarifications = (
        answers if answers is not None else (ask_clarifications(args, program, session, meter) if args.clarify else ())
    )
    started = time.time()
    trace = {
        "question": args.question,
        "corpus": dict(retrieval.description),
        "models": meta["models"],
        "config": meta["config"],
        "structured": args.structured,
        "started": started,
    }
    trace.update(clarifications=list(clarifications), brief=research_brief(args.question.strip(), clarifications))
    received: list[signal.Signals] = []

    def snapshot(tree: dict) -> None:  # the trace as nodes finish: valid and current while the run works
        folder.write_json("trace.json", {**trace, **tree, **source_failures(retrieval), **session.routing()})

    try:
        with session.context():
            result = asyncio.run(_research(program, args, folder, snapshot, received, clarifications, meter))
    except BaseException as err:  # keep what exists: the events so far, and the error
        progress.close()
        trace.update(
            status=RAISED,
            error=redact(f"{type(err).__name__}: {err}"),
            events=[dataclasses.asdict(e) for e in events],
            **source_failures(retrieval),
            **session.routing(),
        )
        folder.write_json("trace.json", trace)
        raise
    progress.close()
    report = result.report
    trace.update(
        seconds=round(time.time() - started, 2), **report.to_dict(), **source_failures(retrieval), **session.routing()
    )
    try:  # the trace first, the report last: a failed write (a full disk) leaves no finished-looking report
        folder.write_json("trace.json", trace)
        if args.bibtex:
            folder.write_text("references.bib", to_bibtex(report.references))
        if args.answer:
            folder.write_text("answer.md", answer_markdown(report))
        if report.taxonomy is not None:
            folder.write_json("taxonomy.json", report.taxonomy)

        folder.write_text("report.html", report_html(report, config=trace["config"], run=trace))
        folder.write_text("report.md", report.markdown)
        folder.finish(report.status, error=report.error or "")
    except OSError:  # open_run records the error in run.json; what this run wrote of its outputs goes
        for name in ("report.md", "report.html", "answer.md", "references.bib", "taxonomy.json"):
            with contextlib.suppress(OSError):
                (folder.path / name).unlink(missing_ok=True)
        raise
    print(f"report: {folder.path / 'report.md'}")
    print(f"trace:  {folder.path / 'trace.json'}")
    print(f"view:   {folder.path / 'report.html'}")
    if args.bibtex:
        print(f"bibtex: {folder.path / 'references.bib'}")
    if args.answer:
        print(f"answer: {folder.path / 'answer.md'}")
    if report.taxonomy is not None:
        print(f"taxonomy: {folder.path / 'taxonomy.json'}")
    if report.stats.resumed_nodes:
        print(f"resumed: {report.stats.resumed_nodes} nodes restored from {folder.path / 'journal.jsonl'}")
    sys.stdout.flush()  # the lines on stderr come after what was printed so far, and before the summary
    for line in source_failure_lines(retrieval):
        print(f"deepresearch run: {line}", file=sys.stderr)
    code = 0
    if report.status in ("failed", "partial"):
        print(
            f"deepresearch run: {'error' if report.status == 'failed' else 'partial'}: {report.error}", file=sys.stderr
        )
        code = EXIT_FAILED
    if report.status == "interrupted":
        print(f"deepresearch run: {report.error}; continue it with --resume", file=sys.stderr)
        code = SIGNALS[received[0]] if received else 130
    sys.stderr.flush()
    print(summary_line(report), flush=True)  # the last line: what was done, and what it cost
    return code


def summary_line(report) -> str:
    """The run in one line: its counts, then its LM requests, tokens and cost, or that it ran offline."""
    s = report.stats
    counts = (
        f"nodes {s.nodes} · searches {s.searches} · learnings {s.learnings} · citations {s.citations} · "
        f"failed branches {s.failed_nodes}"
    )
    if s.offline:
        return f"{counts} · offline: no LM, no tokens, no cost"
    if s.twin_answers:  # calls the LM could not answer usably, answered by the stages' offline twins
        counts += " · offline twin answered " + ", ".join(f"{stage} {n}" for stage, n in s.twin_answers.items())
    dollars = (s.cost or {}).get("total")  # US dollars by LiteLLM's price map; None when a model has no price
    cost = f"cost ${dollars:.4f}" if isinstance(dollars, (int, float)) else "cost unknown (no price for the model)"
    return f"{counts} · LM requests {s.lm_calls} · tokens {s.tokens:,} · {cost}"


def _records(program: DeepResearch, args: argparse.Namespace) -> bool:
    """Whether the run keeps a stage log: as asked, else only when an LM answers (its calls are worth tuning)."""
    return args.stage_log if args.stage_log is not None else not program.is_offline


async def _research(
    program: DeepResearch,
    args: argparse.Namespace,
    folder: RunFolder,
    snapshot,
    received: list[signal.Signals],
    clarifications: tuple[dict[str, str], ...] = (),
    meter: CostMeter | None = None,
):
    """Runs the program with SIGINT and SIGTERM turned into an interrupt: the first stops the running work
    and lets the report of what exists be written; a second one acts as if no handler were installed."""
    loop = asyncio.get_running_loop()
    interrupt = Interrupt()

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        for s in SIGNALS:  # from now on the default: a second Ctrl-C raises KeyboardInterrupt, SIGTERM ends us
            loop.remove_signal_handler(s)
        print(
            f"deepresearch run: {sig.name} received; stopping and writing the report of what exists "
            f"(send it again to stop at once)",
            file=sys.stderr,
        )
        interrupt.set(f"interrupted by {sig.name}")

    installed = []
    for sig in SIGNALS:
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread, or Windows
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
    try:
        return await program.acall(
            question=args.question,
            interrupt=interrupt,
            journal=folder.path / "journal.jsonl",
            resume=args.resume,
            on_snapshot=snapshot,
            clarifications=clarifications,
            meter=meter,
            stage_log=folder.path / STAGE_LOG if _records(program, args) else None,
        )
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def main(args: argparse.Namespace) -> int:
    args.question = printable(args.question)  # terminal escape codes never reach a report or the trace
    if not args.question.strip():
        raise ValueError("question is empty; pass the research question in quotes")
    preset(args.preset, **config_overrides(args))  # every setting checked before any LM call (nan included)
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
        where = (
            "the embedded SciFact demo corpus"
            if EMBEDDED in find_local(DEFAULT_CORPUS, data_dir()).parents
            else "the SciFact corpus under $DEEPRESEARCH_DATA"
        )
        print(
            f"deepresearch run: no --corpus given; searching {where} (5,183 biomedical abstracts, --corpus "
            f"{DEFAULT_CORPUS})",
            file=sys.stderr,
        )
    check_extras(needed_extras(args, run_config(args)))  # a missing extra fails here, not after the research
    out = Path(args.out or Path("runs") / slug(args.question))
    with out_folder_lock(out):  # a second run into the same folder stops here, at once
        check_out_folder(out, args.question, overwrite=args.overwrite)  # before the corpus: bad input fails fast
        if args.resume and answers is None and (out / "trace.json").exists():  # the journal's brief holds them
            with contextlib.suppress(ClarificationsError):  # a trace of a run before clarifications: none kept
                answers = read_clarifications(out / "trace.json")

        retrieval = open_from_args(args)  # a corpus spec or a memory-mapped index (retrievers/open.py)
        with open_run(out, args.question, overwrite=args.overwrite) as folder:  # nothing is removed before this
            return run_research(args, session, retrieval, folder, answers)
