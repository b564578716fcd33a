"""`deepresearch eval gather`: run the gathering loop or a baseline over a query set and score it.

The runner is `deepresearch.eval.run_gather`; see its docstring for what is written under --out, how a rerun
resumes and where the queries run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import (
    add_data_arguments,
    add_output_arguments,
    add_quiet_alias,
    add_workers_arguments,
)
from deepresearch.eval.protocols import DISTANCE_VARIANTS, FAILED_POLICIES, PROTOCOLS

METHODS = ("loop", "direct", "raw")
IN_PROCESS_QUERIES = 8  # queries run at once in this process (no --workers, no --ray)
EXIT_FAILED = 3  # no query got an answer from the model (as `run` exits when its run failed; 2 is bad input)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(
        parser,
        required=True,
        old=("--queries",),
        limit_help="only the first N queries",
        help="the queries: a BEIR folder with qrels or a ScholarGym JSONL file, or a name found under "
        "$DEEPRESEARCH_DATA (scifact, csfcube, scholargym; shenhao/ScholarGym finds the local copy)",
    )
    parser.add_argument("--qrels", default=None, help="BEIR qrels split to evaluate (default test)")
    parser.add_argument("--split", default=None, help="ScholarGym split: all, test or dev (default all)")
    parser.add_argument("--min-relevance", type=int, default=1, help="lowest qrels grade counted as ground truth")
    parser.add_argument(
        "--method",
        default="loop",
        choices=METHODS,
        help="loop: plan-retrieve-assess; direct: one LM-written query, no assessment; raw: the question itself, no LM",
    )
    parser.add_argument("--iterations", type=int, default=5, help="rounds of the loop (T)")
    add_workers_arguments(
        parser,
        help=f"run the queries on this many processes of this machine, one query each at "
        f"a time (each loads the corpus; default: {IN_PROCESS_QUERIES} at once in this "
        f"process)",
        ray_help="run the queries as tasks on a Ray cluster: auto or its HOST:PORT (the [ray] extra)",
    )
    parser.add_argument("--ranking-depth", type=int, default=100, help="ranks recorded per search for Avg.Distance")
    parser.add_argument("--distance", default="per_iteration", choices=DISTANCE_VARIANTS)
    parser.add_argument("--failed", default="excluded", choices=FAILED_POLICIES, help="failed queries in the means")
    parser.add_argument(
        "--protocol",
        default="official",
        choices=PROTOCOLS,
        help="edge rules of the scoring: official (ScholarGym's released scorer, comparable to the "
        "paper's tables) or spec (the paper's prose as read before); docs/reference/protocols.md",
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples for the 95%% intervals")
    parser.add_argument("--program", default=None, help="a compiled Gatherer (DSPy JSON state) to load")
    parser.add_argument(
        "--full-text",
        action="store_true",
        help="the second look at an uncertain candidate reads its open-access PDF (fetched once, "
        "cached) instead of its abstract (--method loop only)",
    )
    parser.add_argument(
        "--full-text-cache",
        default=None,
        metavar="DIR",
        help="folder of fetched PDFs (default ~/.cache/dspy-deepresearch/fulltext)",
    )
    add_output_arguments(
        parser,
        out_help="output folder (default runs/gather-<data>-<method>)",
        overwrite_help="discard earlier results in --out",
        old=("--restart",),
    )
    add_quiet_alias(parser)
    add_retriever_arguments(
        parser,
        corpus_help="the corpus to search (default: the --data BEIR folder): "
        "a path, a name under $DEEPRESEARCH_DATA, hf:NAME; BM25 defaults "
        "to ScholarGym's settings (--bm25-preset scholargym) for ScholarGym "
        "queries",
    )
    add_lm_arguments(parser)


def main(args: argparse.Namespace) -> int:
    import dspy
    from tqdm import tqdm

    from deepresearch.eval.gather import summarize  # lazy: start-up
    from deepresearch.eval.querysets import find_queryset, load_queryset  # lazy: start-up
    from deepresearch.eval.run_gather import (  # lazy: start-up
        DAMAGED,
        SETTINGS_CHECKED,
        UNSET,
        build_program,
        read_records,
        run_on_executor,
        run_queries,
        second_look_totals,
        silent_model,
        summary_markdown,
        take_back,
        trace_for,
        usage_totals,
    )
    from deepresearch.programs.formats.jsonl import JsonlAppender  # lazy: start-up
    from deepresearch.programs.lm.models import server_of  # lazy: start-up
    from deepresearch.programs.lm.replies import LMReplies  # lazy: start-up
    from deepresearch.programs.lm.secrets import redact_url  # lazy: start-up
    from deepresearch.programs.lm.session import open_lm  # lazy: start-up
    from deepresearch.programs.retrieval import data_dir, describe, open_from_args  # lazy: start-up
    from deepresearch.programs.runtime.executor import check_ray_address, open_executor  # lazy: start-up
    from deepresearch.programs.runtime.outputs import atomic_write_text  # lazy: start-up

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
    program = build_program(
        args.method, retrieval.retriever, lm, args.iterations, args.ranking_depth, args.full_text, args.full_text_cache
    )
    if args.program:  # loaded before --out is made: a bad file leaves nothing behind
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
                errors = asyncio.run(run_queries(program, todo, IN_PROCESS_QUERIES, sink, on_done))
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
