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
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from deepresearch.eval.gather import QueryTrace, gt_ranks
from deepresearch.eval.querysets import GatherQuery
from deepresearch.programs.formats.jsonl import read_jsonl
from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.gather.baselines import DirectQuery
from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.lm.session import open_lm
from deepresearch.programs.retrieval import open_from_args
from deepresearch.programs.runtime.executor import JobFailed, working_in
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


def build_program(
    method: str,
    retriever,
    lm,
    iterations: int,
    ranking_depth: int,
    full_text: bool = False,
    full_text_cache: str | None = None,
):
    if full_text:  # the Gatherer searches the wrapped retriever and reads PDFs with this one
        retriever = FullTextRetriever(retriever, FullTextCache(full_text_cache))
    if method == "loop":
        return Gatherer(retriever, GatherConfig(iterations=iterations, ranking_depth=ranking_depth), offline=lm is None)
    return DirectQuery(retriever, raw=method == "raw", offline=lm is None, ranking_depth=ranking_depth)


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
    import dspy

    args, corpus_spec, bm25_preset, cwd, query = job
    with working_in(cwd):  # relative paths of the options, as the command saw them
        key = repr((sorted(vars(args).items()), corpus_spec, bm25_preset, cwd))
        if key not in _WORKER_PROGRAMS:
            session = open_lm(argparse.Namespace(**{**vars(args), "no_preflight": True}))
            retrieval = open_from_args(args, corpus_spec, default_preset=bm25_preset)
            program = build_program(
                args.method,
                retrieval.retriever,
                session.lm,
                args.iterations,
                args.ranking_depth,
                getattr(args, "full_text", False),
                getattr(args, "full_text_cache", None),
            )
            if args.program:
                program.load(args.program)
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
