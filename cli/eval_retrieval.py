"""`deepresearch eval retrieval`: BM25, dense and hybrid rankings of a BEIR set, scored against its qrels.

Published references on BEIR SciFact test (nDCG@10): BM25 0.665 (BEIR, Elasticsearch with its English
analyzer) and all-MiniLM-L6-v2 0.645 (MTEB). The default BM25 settings of every command mirror that
Elasticsearch setup (English analyzer with Porter stemmer and Lucene stop words, Lucene IDF, k1 = 1.2,
b = 0.75, title and text joined). With --index the index's own BM25 and stored embeddings are used: only
the queries are encoded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.options import deprecated

if TYPE_CHECKING:
    from deepresearch.retrievers.types import Hit

# nDCG@10 published for BEIR SciFact test; shown beside our numbers when the corpus folder is scifact.
PUBLISHED = {"scifact": {"bm25": 0.665, "dense": 0.645}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--qrels", default="test", help="qrels split (default test)")
    parser.add_argument("--rrf-k", type=float, default=60.0, help="reciprocal-rank fusion constant")
    parser.add_argument("--weights", default="1,1", help="RRF weights for bm25,dense (default 1,1)")
    parser.add_argument("--hits", type=int, default=100, help="documents ranked per query (default 100)")
    deprecated(parser, "--depth", "--hits")  # --depth is the research tree's levels in every other command
    parser.add_argument("--json", default=None, help="also write the scores to this JSON file")
    add_retriever_arguments(
        parser,
        corpus_help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/) or its name "
        "under $DEEPRESEARCH_DATA (e.g. scifact); with --index its queries "
        "and qrels are scored against the index's documents",
        default_kind="hybrid: bm25, dense and their fusion",
    )
    deprecated(parser, "--no-dense", "--retriever bm25", dest="retriever", action="store_const", const="bm25")


def rank_all(retriever, queries: dict[str, str], hits: int) -> dict[str, list[Hit]]:
    return {qid: retriever.search(text, hits) for qid, text in queries.items()}


def main(args: argparse.Namespace) -> int:
    from deepresearch.eval.retrieval import evaluate_run  # lazy: start-up
    from deepresearch.programs.retrieval import data_dir, open_from_args  # lazy: start-up
    from deepresearch.retrievers import embed  # lazy: start-up
    from deepresearch.retrievers.beir import load_qrels, load_queries  # lazy: start-up
    from deepresearch.retrievers.bm25 import BM25Retriever  # lazy: start-up
    from deepresearch.retrievers.dense import DenseRetriever  # lazy: start-up
    from deepresearch.retrievers.hybrid import rrf_fuse  # lazy: start-up
    from deepresearch.retrievers.index import read_manifest  # lazy: start-up
    from deepresearch.retrievers.sources import find_local, not_found_message  # lazy: start-up

    if not args.corpus:
        raise ValueError("pass --corpus: the BEIR folder whose queries and qrels are scored")
    if args.json:  # checked before the evaluation, not after it ran
        from deepresearch.programs.runtime.outputs import check_file_writable  # lazy: start-up

        check_file_writable(args.json, "--json")
    folder = find_local(args.corpus, data_dir())
    if folder is None or not (folder / "queries.jsonl").exists():
        raise ValueError(not_found_message(args.corpus, data_dir(), what="BEIR folder with queries.jsonl"))
    queries_all = load_queries(folder)
    qrels = load_qrels(folder, args.qrels)
    queries = {q: queries_all[q] for q in qrels if q in queries_all}
    if not queries:
        raise ValueError(f"no query of qrels split {args.qrels!r} is in {folder / 'queries.jsonl'}; check the split")
    weights = [float(w) for w in args.weights.split(",")]
    if len(weights) != 2:
        raise ValueError(f"--weights {args.weights!r} should be two numbers, bm25,dense")

    kind = "hybrid"
    if args.retriever is None and args.index and read_manifest(args.index).get("dense") is None:
        # an index built without --dense: score what it holds rather than refuse the whole command
        print(
            f"index {args.index} has no dense part: BM25 only (build it with --dense-model MODEL for dense and hybrid)",
            file=sys.stderr,
        )
        kind = "bm25"
    started = time.perf_counter()
    retrieval = open_from_args(args, str(folder), kind=kind)
    timings = {"open_s": round(time.perf_counter() - started, 3)}
    qids = list(queries)
    rankings: dict[str, dict[str, list]] = {}
    # open_retriever keeps a BM25Retriever under `bm25` and a DenseRetriever under `dense`
    bm25, dense = retrieval.parts.get("bm25"), retrieval.parts.get("dense")
    bm25 = bm25 if isinstance(bm25, BM25Retriever) else None
    dense = dense if isinstance(dense, DenseRetriever) else None
    if bm25 is not None:
        rankings["bm25"] = rank_all(bm25, queries, args.hits)
    if dense is not None:
        vectors = embed.encode([queries[q] for q in qids], dense.model)  # the queries, in one batch
        rankings["dense"] = {q: dense.search(v, args.hits) for q, v in zip(qids, vectors)}
    if bm25 is not None and dense is not None:
        rankings["hybrid"] = {
            q: [d for d, _ in rrf_fuse([rankings["bm25"][q], rankings["dense"][q]], weights, args.rrf_k)] for q in qids
        }
    if not retrieval.parts:  # qdrant: its own ranking
        rankings[retrieval.kind] = rank_all(retrieval.retriever, queries, args.hits)
    runs = {
        name: {q: [h if isinstance(h, str) else h.doc.doc_id for h in hits] for q, hits in ranking.items()}
        for name, ranking in rankings.items()
    }
    scores = {name: evaluate_run(run, qrels) for name, run in runs.items()}

    published = PUBLISHED.get(folder.resolve().name.lower(), {})
    described = retrieval.description
    print(
        f"{folder.name} {args.qrels}: {len(queries)} queries; "
        f"{'index ' + described['index'] if described.get('index') else 'built in memory'}; "
        f"bm25 {json.dumps(bm25.params()) if bm25 else 'off'}; dense {dense.model if dense else 'off'}"
    )
    print(f"{'method':8} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'MAP@100':>8}  published nDCG@10")
    for name, m in scores.items():
        ref = published.get(name)
        ref_text = f"{ref:.3f} (diff {m['ndcg@10'] - ref:+.3f})" if ref is not None else "-"
        print(f"{name:8} {m['ndcg@10']:8.4f} {m['recall@100']:7.4f} {m['mrr@10']:7.4f} {m['map@100']:8.4f}  {ref_text}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "scores": scores,
                    "published": published,
                    "timings": timings,
                    "index": described.get("index"),
                    "bm25": bm25.params() if bm25 else None,
                    "dense": dense.model if dense else None,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return 0
