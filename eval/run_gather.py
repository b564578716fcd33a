"""The runner of `deepresearch eval gather` (its options: deepresearch.cli.eval_gather): run the gathering loop
or a baseline over a query set and score it.

Writes, under --out: `results.jsonl` (one record per query: the whole GatherResult, which keeps every
subquery's candidates for replay, plus the ground truth's ranks per round), `run.json` (settings, checked
on resume; it also names the scoring --protocol), `summary.json` and `summary.md` (both name the protocol and
the code its numbers match). Each record is fsynced as its query finishes, and the summary
files are written whole at the end. Running the same command into the same --out again (after a kill, say)
resumes from `results.jsonl`, redoing only the queries that have no finished record; --overwrite starts afresh.

Where the queries run: by default in this process, several at once (`IN_PROCESS_QUERIES` of the command); with --workers N on a pool
of N processes of this machine, with --ray on a Ray cluster (programs/runtime/executor.py). Each worker opens
the LM, the corpus and the program from the command's options once, runs one query per job and sends its
record back; this process appends the records and scores them, so resume and the summary do not change.

--full-text (the loop only): the second look at a candidate the assessor labels uncertain reads the
passages of its open-access PDF (`metadata["pdf_url"]`), fetched and cached as by `deepresearch run
--full-text`; a paper without one is judged on its abstract and counted as `unread` on its search.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import dspy
from tqdm import tqdm

from deepresearch.eval.gather import QueryTrace, gt_ranks, summarize
from deepresearch.eval.querysets import GatherQuery, find_queryset, load_queryset
from deepresearch.programs.formats.jsonl import JsonlAppender, read_jsonl
from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.gather.baselines import DirectQuery
from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.lm.models import server_of
from deepresearch.programs.lm.replies import LMReplies
from deepresearch.programs.lm.secrets import redact_url
from deepresearch.programs.lm.session import open_lm
from deepresearch.programs.retrieval import data_dir, describe, open_from_args
from deepresearch.programs.runtime.executor import JobFailed, check_ray_address, open_executor, working_in
from deepresearch.programs.runtime.outputs import atomic_write_text
from deepresearch.retrievers.fulltext import FullTextCache, FullTextRetriever
from deepresearch.retrievers.types import Hit

SETTINGS_CHECKED = (
    "queries",
    "split",
    "corpus",
    "method",
    "lm",
    "iterations",
    "ranking_depth",
    "retriever",
    "full_text",
)
UNSET = {"full_text": False}  # the value of a setting a run recorded before it existed
DAMAGED = "fix or remove the line, or pass --overwrite to start the run afresh"
EXIT_FAILED = 3  # no query got an answer from the model (as `run` exits when its run failed; 2 is bad input)


def build_program(args: argparse.Namespace, retriever, lm):
    """The program of --method over `retriever`, with the compiled state of --program loaded (a bad file raises)."""
    if args.full_text:  # the Gatherer searches the wrapped retriever and reads PDFs with this one
        retriever = FullTextRetriever(retriever, FullTextCache(args.full_text_cache))
    if args.method == "loop":
        config = GatherConfig(iterations=args.iterations, ranking_depth=args.ranking_depth)
        program = Gatherer(retriever, config, offline=lm is None)
    else:
        program = DirectQuery(retriever, raw=args.method == "raw", offline=lm is None, ranking_depth=args.ranking_depth)
    if args.program:
        if lm is None:
            raise ValueError("--program needs an LM: a compiled program tunes LM prompts; pass --lm")
        if not Path(args.program).is_file():
            raise ValueError(
                f"--program {args.program}: no such file; pass the .json file `deepresearch optimize` wrote"
            )
        try:
            program.load(args.program)
        except (OSError, ValueError, KeyError, TypeError) as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ValueError(
                f"--program {args.program} is not a saved gathering program ({reason}); pass the .json file "
                f"`deepresearch optimize --program gather` wrote"
            ) from None
    return program


def record_for(query: GatherQuery, result: GatherResult, seconds: float) -> dict[str, Any]:
    """The JSONL record of one finished query; the recorded ranking tops are replaced by the ground truth's ranks."""
    ranks = gt_ranks(result, frozenset(query.gt_ids))
    slim = replace(
        result,
        rounds=tuple(replace(r, searches=tuple(replace(s, ranking=()) for s in r.searches)) for r in result.rounds),
    )
    return {
        **asdict(query),
        "status": "done",
        "seconds": round(seconds, 3),
        "gt_ranks": ranks,
        "result": slim.to_dict(),
    }


def trace_for(record: dict[str, Any]) -> QueryTrace:
    result = GatherResult.from_dict(record["result"])
    trace = QueryTrace.from_result(record["query_id"], record["gt_ids"], result)
    return replace(trace, ranks=tuple({k: int(v) for k, v in r.items()} for r in record["gt_ranks"]))


def read_records(path: Path, hint: str = "fix or remove the line") -> dict[str, dict[str, Any]]:
    """query_id -> its last record (a query that failed and was redone has two); a last line cut by a kill is
    ignored with a warning, a damaged line before it raises `deepresearch.programs.formats.jsonl.JsonlError` ending with `hint`."""
    return {record["query_id"]: record for record in read_jsonl(path, hint=hint)}


@dataclass(frozen=True)
class AssessmentCase:
    """One recorded search, frozen for re-running the assessor: its inputs, candidates and ground truth."""

    query_id: str
    question: str
    subquery: str
    checklist: str
    hits: tuple[Hit, ...]
    gt_ids: tuple[str, ...]
    labels: tuple[str, ...]


def load_frozen_cases(results: str | Path, corpus) -> list[AssessmentCase]:
    """Every recorded search of a `results.jsonl` with its candidates rebuilt as hits over `corpus`, so an
    assessor can be re-run (or optimised) on exactly the candidates the loop saw."""
    cases = []
    for record in read_records(Path(results)).values():
        if record.get("status") != "done":
            continue
        result = GatherResult.from_dict(record["result"])
        for r in result.rounds:
            for s in r.searches:
                docs = [corpus.get(c.doc_id) for c in s.candidates]
                if any(d is None for d in docs):
                    raise ValueError(
                        f"{results}: query {record['query_id']} cites documents missing from the "
                        f"corpus; pass the corpus the run used"
                    )
                cases.append(
                    AssessmentCase(
                        query_id=record["query_id"],
                        question=result.question,
                        subquery=s.text,
                        checklist=r.checklist,
                        hits=tuple(Hit(doc=d, score=c.score, rank=c.rank) for d, c in zip(docs, s.candidates)),
                        gt_ids=tuple(record["gt_ids"]),
                        labels=tuple(c.label for c in s.candidates),
                    )
                )
    return cases


async def run_query(program, q: GatherQuery) -> dict[str, Any]:
    """The record of one query: done, or an error (recorded and redone on resume; the other queries go on)."""
    started = time.perf_counter()
    try:
        out = await program.acall(question=q.query, date_constraint=q.date_constraint)
        return record_for(q, out.result, time.perf_counter() - started)
    except Exception as err:
        return {**asdict(q), "status": "error", "error": f"{type(err).__name__}: {str(err)[:300]}"}


async def run_queries(program, queries: list[GatherQuery], workers: int, sink, on_done) -> int:
    """Runs the queries `workers` at a time, appending each record to `sink` (a `JsonlAppender`) as it
    finishes; returns the error count."""
    slots = asyncio.Semaphore(workers)
    errors = 0

    async def one(q: GatherQuery) -> None:
        nonlocal errors
        async with slots:
            record = await run_query(program, q)
        errors += record["status"] != "done"
        sink.append(record)  # fsynced: a kill after this line never costs this query again
        on_done(record)

    await asyncio.gather(*[one(q) for q in queries])
    return errors


_WORKER_PROGRAMS: dict[str, tuple] = {}  # per worker process: the session and program of a command's options


def gather_one(job: tuple[argparse.Namespace, str | None, str, str, GatherQuery]) -> dict[str, Any]:
    """One query run in a worker process (--workers, --ray): its record.

    The worker opens the LM session, the corpus and the program from the command's options once (the LM was
    checked by the command already) and keeps them for the next query of the same command.
    """
    args, corpus_spec, bm25_preset, cwd, query = job
    with working_in(cwd):  # relative paths of the options, as the command saw them
        key = repr((sorted(vars(args).items()), corpus_spec, bm25_preset, cwd))
        if key not in _WORKER_PROGRAMS:
            session = open_lm(argparse.Namespace(**{**vars(args), "no_preflight": True}))
            retrieval = open_from_args(args, corpus_spec, default_preset=bm25_preset)
            program = build_program(args, retrieval.retriever, session.lm)
            _WORKER_PROGRAMS.clear()  # one command's program per process
            _WORKER_PROGRAMS[key] = (session, program)
        session, program = _WORKER_PROGRAMS[key]
        with session.context(), dspy.context(trace=None, disable_history=True):
            return asyncio.run(run_query(program, query))


def run_on_executor(executor, job_of, queries: list[GatherQuery], sink, on_done) -> int:
    """`run_queries` on `executor` (programs/runtime/executor.py): each query is one job `job_of(query)` of
    `gather_one`; each record is appended here as it comes back. Returns the error count."""
    errors = 0
    with executor as pool:
        print(f"queries on {pool.kind} ({pool.workers} at once)", file=sys.stderr, flush=True)
        for index, record in pool.map_unordered(gather_one, [job_of(q) for q in queries]):
            if isinstance(record, JobFailed):  # the worker could not run it (or died): redone on resume
                record = {**asdict(queries[index]), "status": "error", "error": record.error}
            errors += record["status"] != "done"
            sink.append(record)
            on_done(record)
    return errors


def silent_model(ran: list[dict[str, Any]]) -> int | None:
    """The LM requests that failed when no query of `ran` got an answer from the model: each ended in an
    error or sent requests that all failed (the loop then ends `plan_failed`, as if nothing was planned), and
    some did send requests; None when a query got an answer (or none asked: an offline method, the cache)."""
    failed = 0
    for record in ran:
        if record.get("status") != "done":
            continue
        usage = record.get("result", {}).get("usage", {}).values()
        if any(int(u.get("calls", 0)) for u in usage) or not any(int(u.get("failed", 0)) for u in usage):
            return None
        failed += sum(int(u.get("failed", 0)) for u in usage)
    return failed or None


def take_back(out: Path, created: Path | None, results: Path, recorded: int, had_run_json: bool) -> None:
    """Leaves --out as this command found it: the folder it created goes; else results.jsonl is cut back to
    the `recorded` bytes earlier runs left (the queries run now are redone by the next run)."""
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
        return
    if recorded:
        os.truncate(results, recorded)
    else:
        results.unlink(missing_ok=True)
    if not had_run_json:
        (out / "run.json").unlink(missing_ok=True)


def usage_totals(records) -> dict[str, int]:
    totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for record in records:
        for stage in record.get("result", {}).get("usage", {}).values():
            for key in totals:
                totals[key] += int(stage.get(key, 0))
    return totals


def second_look_totals(records) -> dict[str, int]:
    """Second looks over the finished queries: `rechecked`, `browsed` (read from the full text), `unread`."""
    totals = {"rechecked": 0, "browsed": 0, "unread": 0}
    for record in records:
        for key, n in GatherResult.from_dict(record["result"]).second_looks().items():
            totals[key] += n
    return totals


def summary_markdown(summary: dict, settings: dict, usage: dict) -> str:
    final, ci = summary["final"], summary["ci95"]
    stops = "".join(f"; {reason} {n}" for reason, n in summary.get("failed_by_stop", {}).items())
    discard = "GT discard (%)" if summary.get("gt_discard_unit") == "percent" else "GT discard (fraction)"
    rows = [
        ("R", "recall"),
        ("P", "precision"),
        ("F1", "f1"),
        ("Ret.R", "ret_recall"),
        ("Ret.P", "ret_precision"),
        ("Ret.F1", "ret_f1"),
        ("Avg.Distance", "avg_distance"),
        (discard, "gt_discard_rate"),
        ("mean per-query F1", "mean_query_f1"),
        ("micro P", "micro_precision"),
        ("micro R", "micro_recall"),
        ("selected per query", "selected_size"),
    ]
    lines = [
        f"# Gathering: {settings['method']} · {settings['lm']} · {Path(settings['queries']).name} "
        f"({settings['split']})",
        "",
        f"Queries {summary['queries']} · evaluated {summary['evaluated']} · skipped without ground truth "
        f"{summary['skipped_no_gt']} · failed {summary['failed']} ({summary['failed_policy']}{stops}) · "
        f"T = {summary['iterations']} · Avg.Distance {summary['distance_variant']}",
        "",
        f"Protocol {summary['protocol']}: {summary['protocol_source']}",
        "",
        "| metric | value | 95% CI |",
        "|---|---|---|",
    ]
    for label, key in rows:
        if key in final:
            interval = f"{ci[key][0]:.3f}–{ci[key][1]:.3f}" if key in ci else ""
            value = "–" if final[key] is None else f"{final[key]:.3f}"
            lines.append(f"| {label} | {value} | {interval} |")
    curves = summary["per_iteration"]
    if curves:
        n = len(curves["recall"])
        lines += ["", "| per iteration | " + " | ".join(f"It.{i + 1}" for i in range(n)) + " |", "|---|" + "---|" * n]
        for label, key in [row for row in rows if row[1] in curves]:  # summarize's per-iteration curves
            lines.append(f"| {label} | " + " | ".join("–" if v is None else f"{v:.3f}" for v in curves[key]) + " |")
    lines += [
        "",
        f"LM calls {usage['calls']} · tokens {usage['prompt_tokens'] + usage['completion_tokens']} "
        f"(prompt {usage['prompt_tokens']}, completion {usage['completion_tokens']})",
        "",
    ]
    looks = summary.get("second_looks")
    if looks and (looks["rechecked"] or settings.get("full_text")):
        lines[-1:] = [
            f"Second looks {looks['rechecked']} · read from the full text {looks['browsed']} · "
            f"full text not available {looks['unread']}",
            "",
        ]
    return "\n".join(lines)


def run(args: argparse.Namespace, in_process_queries: int) -> int:
    if args.workers and args.ray:
        raise ValueError("--workers sets the local pool and --ray a cluster; pass one of them")
    if args.ray:  # before --out is made
        check_ray_address(args.ray)
    if args.full_text and args.method != "loop":
        raise ValueError(
            f"--full-text is read by the loop's second look, which --method {args.method} does not "
            f"have; drop --full-text or use --method loop"
        )
    # the LM is checked before the queries and the corpus are loaded: a bad key or a dead server fails in seconds
    session = open_lm(args)
    lm, model = session.lm, session.model
    kind, found = find_queryset(args.data, data_dir())
    queries = load_queryset(found, args.qrels or args.split, args.min_relevance)
    split = args.qrels or args.split or ("test" if kind == "beir" else "all")
    if args.limit is not None:
        queries = queries[: args.limit]
    if not queries:
        raise ValueError(f"no queries in {args.data} (split {split}); check --qrels/--split")
    corpus_spec = args.corpus or (str(found) if kind == "beir" else None)
    if corpus_spec is None and args.index is None:
        raise ValueError("a ScholarGym query set needs --corpus or --index (its 570K-paper corpus is not bundled)")
    # ScholarGym's own BM25 for its queries, unless an index or --bm25-preset says otherwise
    bm25_preset = "default" if kind == "beir" else "scholargym"
    retrieval = open_from_args(args, corpus_spec, default_preset=bm25_preset)
    corpus = retrieval.corpus
    assert corpus is not None  # a corpus or an index was given (checked above): a local corpus is searched
    described = {k: retrieval.description.get(k) for k in ("retriever", "index", "bm25", "dense", "qdrant")}
    program = build_program(args, retrieval.retriever, lm)  # before --out is made: a bad --program leaves nothing
    out = Path(args.out or Path("runs") / f"gather-{Path(args.data).name}-{args.method}")
    created = next((p for p in reversed((out, *out.parents)) if not p.exists()), None)  # the first folder made
    out.mkdir(parents=True, exist_ok=True)
    settings = {
        "queries": str(args.data),
        "split": split,
        "corpus": f"{corpus.name}:{corpus.fingerprint()[:12]}",
        "method": args.method,
        "lm": model,
        "iterations": args.iterations if args.method == "loop" else 1,
        "ranking_depth": args.ranking_depth,
        "retriever": described,
        "program": args.program,
        "full_text": bool(args.full_text),
        "protocol": args.protocol,
    }
    results_path, run_path = out / "results.jsonl", out / "run.json"
    if args.overwrite:
        results_path.unlink(missing_ok=True)
    elif results_path.exists() and run_path.exists():
        before = json.loads(run_path.read_text())
        changed = [k for k in SETTINGS_CHECKED if before.get(k, UNSET.get(k)) != settings[k]]
        if changed:
            raise ValueError(
                f"{out} holds a run with different {', '.join(changed)}; pass --overwrite or another --out"
            )
    had_run_json = run_path.exists()
    atomic_write_text(run_path, json.dumps(settings, indent=2))
    records = read_records(results_path, DAMAGED)
    wanted = {q.query_id for q in queries}
    todo = [q for q in queries if records.get(q.query_id, {}).get("status") != "done"]
    print(
        f"{len(queries)} queries · {len(queries) - len(todo)} already done · {describe(retrieval)} · "
        f"{args.method} · {model}",
        file=sys.stderr,
    )

    bar = tqdm(
        total=len(todo),
        unit="query",
        desc=args.method,
        file=sys.stderr,
        disable=getattr(args, "quiet", False) or not todo,
        dynamic_ncols=True,
    )

    def on_done(record):
        records[record["query_id"]] = record
        bar.update(1)

    started = time.perf_counter()
    replies = LMReplies()  # why the LM calls of the queries run here failed, when they all did
    with JsonlAppender(results_path) as sink:  # cuts the line a kill left unfinished
        recorded = results_path.stat().st_size  # what earlier runs left
        if args.workers or args.ray:
            cwd = os.getcwd()
            errors = run_on_executor(
                open_executor(workers=args.workers, ray=args.ray),
                lambda q: (args, corpus_spec, bm25_preset, cwd, q),
                todo,
                sink,
                on_done,
            )
        else:
            with session.context(), dspy.context(trace=None, disable_history=True), replies.watching():
                errors = asyncio.run(run_queries(program, todo, in_process_queries, sink, on_done))
    bar.close()
    failed_requests = silent_model([records[q.query_id] for q in todo]) if lm is not None and todo else None
    if failed_requests is not None:  # a dead or failing server: no metric of these queries means anything
        take_back(out, created, results_path, recorded, had_run_json)
        server = server_of(lm)
        cause = replies.counts().cause() or f"every request to {redact_url(server) if server else model} failed"
        queries_run = f"{len(todo)} quer{'y' if len(todo) == 1 else 'ies'}"
        print(
            f"deepresearch eval gather: error: no query got an answer from the model: {cause} ({queries_run}; "
            f"{failed_requests} LM requests failed, none answered); nothing was recorded, rerun the same command "
            f"once the server answers",
            file=sys.stderr,
        )
        return EXIT_FAILED
    done = [records[q.query_id] for q in queries if records.get(q.query_id, {}).get("status") == "done"]
    traces = [trace_for(r) for r in done]
    iterations = settings["iterations"]
    summary = summarize(
        traces, iterations, variant=args.distance, failed=args.failed, bootstrap=args.bootstrap, protocol=args.protocol
    )
    usage = usage_totals(done)
    summary.update(
        settings=settings,
        usage=usage,
        second_looks=second_look_totals(done),
        errors=len(wanted) - len(done),
        seconds=round(time.perf_counter() - started, 2),
    )
    if not summary["evaluated"] and summary["failed"]:
        stops = ", ".join(f"{reason} {n}" for reason, n in summary["failed_by_stop"].items())
        print(
            f"every query with ground truth failed under --protocol {args.protocol} ({stops}), so no metric is "
            f"left; --failed included scores them as they stand",
            file=sys.stderr,
        )
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2))
    markdown = summary_markdown(summary, settings, usage)
    atomic_write_text(out / "summary.md", markdown)
    print(markdown)
    print(f"results: {results_path}\nsummary: {out / 'summary.md'}")
    if errors or len(done) < len(queries):
        print(
            f"{len(queries) - len(done)} queries did not finish (errors are in results.jsonl); "
            f"run the same command again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0
