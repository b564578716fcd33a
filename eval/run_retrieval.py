"""`deepresearch eval retrieval`: BM25, dense and hybrid rankings of a BEIR set, scored against its qrels.

Published references on BEIR SciFact test (nDCG@10): BM25 0.665 (BEIR, Elasticsearch with its English
analyzer) and all-MiniLM-L6-v2 0.645 (MTEB). The BM25 defaults here mirror that Elasticsearch setup:
English analyzer (Porter stemmer, Lucene stop words), Lucene IDF, k1 = 1.2, b = 0.75, title and text joined.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from eval.retrieval import evaluate_run
from retrievers import embed
from retrievers.beir import load_qrels, load_queries
from retrievers.bm25 import BM25Retriever
from retrievers.cli import add_bm25_arguments, bm25_settings
from retrievers.corpus import load_corpus
from retrievers.dense import DenseRetriever
from retrievers.hybrid import rrf_fuse
from retrievers.index import open_index
from retrievers.types import Hit

# nDCG@10 published for BEIR SciFact test; shown beside our numbers when the corpus folder is scifact.
PUBLISHED = {"scifact": {"bm25": 0.665, "dense": 0.645}}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--corpus", required=True, help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("--qrels", default="test", help="qrels split (default test)")
    parser.add_argument("--index", default=None, help="use a prebuilt index folder instead of building in memory")
    parser.add_argument("--dense", default=embed.DEFAULT_MODEL, metavar="MODEL", help="dense model (default all-MiniLM-L6-v2)")
    parser.add_argument("--no-dense", action="store_true", help="BM25 only")
    parser.add_argument("--rrf-k", type=float, default=60.0, help="reciprocal-rank fusion constant")
    parser.add_argument("--weights", default="1,1", help="RRF weights for bm25,dense (default 1,1)")
    parser.add_argument("--depth", type=int, default=100, help="documents ranked per query")
    parser.add_argument("--json", default=None, help="also write the scores to this JSON file")
    add_bm25_arguments(parser, tokenizer="english", k1=1.2, method="lucene", text_format="plain")

def rank_all(retriever, queries: dict[str, str], depth: int) -> dict[str, list[Hit]]:
    return {qid: retriever.search(text, depth) for qid, text in queries.items()}

def main(args: argparse.Namespace) -> int:
    folder = Path(args.corpus)
    queries_all = load_queries(folder)
    qrels = load_qrels(folder, args.qrels)
    queries = {q: queries_all[q] for q in qrels if q in queries_all}
    if not queries:
        raise ValueError(f"no query of qrels split {args.qrels!r} is in {folder / 'queries.jsonl'}; check the split")
    weights = [float(w) for w in args.weights.split(",")]
    if len(weights) != 2:
        raise ValueError(f"--weights {args.weights!r} should be two numbers, bm25,dense")

    timings = {}
    started = time.perf_counter()
    if args.index:
        index = open_index(args.index, parts=("bm25",) if args.no_dense else ("bm25", "dense"))
        bm25, dense = index.bm25, None if args.no_dense else index.dense
        if bm25 is None:
            raise ValueError(f"index {args.index} has no BM25 part; rebuild it without --no-bm25")
        if dense is None and not args.no_dense:
            raise ValueError(f"index {args.index} has no dense part; rebuild it with --dense MODEL or pass --no-dense")
    else:
        corpus = load_corpus(folder)
        bm25 = BM25Retriever(corpus, **bm25_settings(args))
        dense = None
        if not args.no_dense:
            dense = DenseRetriever(corpus, args.dense, show_progress=sys.stderr.isatty())
    timings["load_or_build_s"] = round(time.perf_counter() - started, 2)

    rankings = {"bm25": rank_all(bm25, queries, args.depth)}
    if dense is not None:
        qids = list(queries)
        vectors = embed.encode([queries[q] for q in qids], dense.model)
        rankings["dense"] = {q: dense.search(v, args.depth) for q, v in zip(qids, vectors)}
        rankings["hybrid"] = {q: [d for d, _ in rrf_fuse([rankings["bm25"][q], rankings["dense"][q]], weights,
                                                          args.rrf_k)] for q in qids}
    runs = {name: {q: [h if isinstance(h, str) else h.doc.doc_id for h in hits] for q, hits in ranking.items()}
            for name, ranking in rankings.items()}
    scores = {name: evaluate_run(run, qrels) for name, run in runs.items()}

    published = PUBLISHED.get(folder.resolve().name.lower(), {})
    print(f"{folder.name} {args.qrels}: {len(queries)} queries; "
          f"bm25 {json.dumps(bm25.params())}; dense {dense.model if dense else 'off'}")
    print(f"{'method':8} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'MAP@100':>8}  published nDCG@10")
    for name, m in scores.items():
        ref = published.get(name)
        ref_text = f"{ref:.3f} (diff {m['ndcg@10'] - ref:+.3f})" if ref is not None else "-"
        print(f"{name:8} {m['ndcg@10']:8.4f} {m['recall@100']:7.4f} {m['mrr@10']:7.4f} {m['map@100']:8.4f}  {ref_text}")
    if args.json:
        Path(args.json).write_text(json.dumps({"scores": scores, "published": published, "timings": timings,
                                               "bm25": bm25.params(), "dense": dense.model if dense else None},
                                              indent=2), encoding="utf-8")
    return 0
