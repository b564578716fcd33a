"""One question researched into a claimed run folder: what `deepresearch run` does once its options are
checked, shared with `batch` (through `run`) and `mcp`'s research tool. The program's modules (and DSPy) load
here, not in `run`'s parser, so `deepresearch run --help` answers at once.
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

from deepresearch.programs.artifacts import RAISED
from deepresearch.programs.config import ResearchConfig, preset
from deepresearch.programs.formats.exports import to_bibtex, to_ris
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.lm.session import LMSession
from deepresearch.programs.report_view import report_html
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.retrieval import data_dir
from deepresearch.programs.runtime.context import Interrupt
from deepresearch.programs.runtime.events import Event, EventHandler
from deepresearch.programs.runtime.files import STAGE_LOG
from deepresearch.programs.runtime.outputs import RunFolder
from deepresearch.programs.runtime.progress import Progress
from deepresearch.programs.runtime.scheduler import CostMeter
from deepresearch.programs.stages.clarifier import research_brief
from deepresearch.programs.stages.names import RESEARCH_STAGES
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.extras import EXTRAS
from deepresearch.retrievers.sources import resolve_source, source_extras

EXIT_FAILED = 3  # the run produced nothing because of failures (distinct from 2, bad input)
SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}  # the exit code of a run each signal interrupted (128 + n)


def slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "run"


def parse_stage_lms(items: list[str]) -> dict[str, str]:
    """`--stage-lm STAGE=MODEL` options as a mapping, checked before any LM is built."""
    models = {}
    for item in items:
        stage, _, stage_model = item.partition("=")
        if stage not in RESEARCH_STAGES or not stage_model:
            raise ValueError(
                f"--stage-lm {item!r} should be STAGE=MODEL with STAGE one of: {', '.join(RESEARCH_STAGES)}"
            )
        models[stage] = stage_model
    return models


def run_config(args: argparse.Namespace) -> ResearchConfig:
    """The run's settings: the preset with the options given on the command line."""
    return preset(args.preset, **config_overrides(args))


def config_overrides(args: argparse.Namespace) -> dict:
    """The options that override the preset's settings, as ResearchConfig fields (only those given)."""
    given = {
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
    }
    return {k: v for k, v in given.items() if v is not None}


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


def build_program(args: argparse.Namespace, retriever, on_event, session: LMSession) -> DeepResearch:
    config = run_config(args)
    program = DeepResearch(
        retriever=retriever, config=config, offline=session.is_offline, lms=session.program_lms(), on_event=on_event
    )
    if args.program:
        if session.is_offline:
            raise ValueError("--program needs an LM: a compiled program tunes LM prompts; pass --lm")
        program.load(args.program)
    return program


def answer_markdown(report) -> str:
    """answer.md: the question, the short answer, and the references it cites (numbered as in the report)."""
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", report.answer)}
    refs = [r.render() for r in report.references if r.number in cited]
    lead = f"> {report.error}\n\n" if report.status != "done" and report.error else ""
    parts = [f"# {report.question}", lead + (report.answer or "No answer was written.")]
    if refs:
        parts.append("## References\n\n" + "\n\n".join(refs))
    return "\n\n".join(parts) + "\n"


def source_failures(retrieval) -> dict:
    """`source_failures` for the trace: each search a search engine failed (or skipped after failing) while the
    run went on with the other sources; nothing for a retriever without engines."""
    found = getattr(retrieval.retriever, "failures", None)
    if found is None:
        return {}
    return {"source_failures": [{k: redact(v) if isinstance(v, str) else v for k, v in f.items()} for f in list(found)]}


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
    events: list[Event] = []  # every event, for the trace of a run that raised

    def record(event: Event) -> None:  # kept, shown, and passed on to `on_event`
        events.append(event)
        progress(event)
        if on_event is not None:
            on_event(event)

    program = build_program(args, retrieval.retriever, record, session)
    meter = CostMeter()  # the run's usage: the clarifying questions are counted in it too
    clarifications = (
        answers if answers is not None else (ask_clarifications(args, program, session, meter) if args.clarify else ())
    )
    started = time.time()
    trace = {
        "question": args.question,
        "corpus": dict(retrieval.description),
        "models": session.models(),
        "config": program.config.to_dict(),
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
        if getattr(args, "ris", False):
            folder.write_text("references.ris", to_ris(report.references))
        if args.answer:
            folder.write_text("answer.md", answer_markdown(report))
        if report.taxonomy is not None:
            folder.write_json("taxonomy.json", report.taxonomy)

        folder.write_text("report.html", report_html(report, config=trace["config"], run=trace))
        folder.write_text("report.md", report.markdown)
        folder.finish(report.status, error=report.error or "")
    except OSError:  # open_run records the error in run.json; what this run wrote of its outputs goes
        for name in ("report.md", "report.html", "answer.md", "references.bib", "references.ris", "taxonomy.json"):
            with contextlib.suppress(OSError):
                (folder.path / name).unlink(missing_ok=True)
        raise
    print(f"report: {folder.path / 'report.md'}")
    print(f"trace:  {folder.path / 'trace.json'}")
    print(f"view:   {folder.path / 'report.html'}")
    if args.bibtex:
        print(f"bibtex: {folder.path / 'references.bib'}")
    if getattr(args, "ris", False):
        print(f"ris:    {folder.path / 'references.ris'}")
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

    # a stage log as asked, else only when an LM answers (its calls are worth tuning)
    keeps_log = args.stage_log if args.stage_log is not None else not program.is_offline
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
            stage_log=folder.path / STAGE_LOG if keeps_log else None,
        )
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
