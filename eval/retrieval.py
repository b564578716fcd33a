"""Ranking metrics: nDCG@k, Recall@k, MRR@k and MAP@k, as pure functions.

Definitions follow trec_eval (the tool behind BEIR's and MTEB's published numbers): graded gains are
the relevance labels themselves (linear), the ideal DCG ranks every judged-relevant document, and a
label of 0 or below counts as not relevant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]


def _relevant(judged: Mapping[str, int]) -> set[str]:
    return {d for d, g in judged.items() if g > 0}


def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain of the first k ranked ids (gain = label, log2 discount)."""
    dcg = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal_gains = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the first k."""
    relevant = _relevant(judged)
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """1 / rank of the first relevant document within the first k, else 0."""
    relevant = _relevant(judged)
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if d in relevant), 0.0)


def average_precision(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Mean of precision@i over the relevant documents at ranks i <= k, divided by all relevant ones."""
    relevant = _relevant(judged)
    if not relevant:
        return 0.0
    found, total = 0, 0.0
    for i, d in enumerate(ranked[:k]):
        if d in relevant:
            found += 1
            total += found / (i + 1)
    return total / len(relevant)


METRICS = {"ndcg": ndcg_at_k, "recall": recall_at_k, "mrr": reciprocal_rank, "map": average_precision}


def evaluate_run(run: Run, qrels: Qrels, ks: Mapping[str, int] | None = None) -> dict[str, float]:
    """Mean of each metric over the judged queries, keyed like `ndcg@10`.

    Args:
        run: Query id -> ranked document ids; a judged query missing from the run scores 0.
        qrels: Query id -> {document id: label}; queries without a relevant document are skipped.
        ks: Metric name -> cut-off, default nDCG@10, Recall@100, MRR@10, MAP@100.

    Raises:
        ValueError: for an unknown metric name, or qrels with no relevant document at all.
    """
    ks = dict(ks or {"ndcg": 10, "recall": 100, "mrr": 10, "map": 100})
    unknown = set(ks) - set(METRICS)
    if unknown:
        raise ValueError(f"unknown metric {sorted(unknown)[0]!r}; choose from: {', '.join(METRICS)}")
    queries = [q for q, judged in qrels.items() if _relevant(judged)]
    if not queries:
        raise ValueError("the qrels hold no relevant document; check the qrels file and split")
    return {
        f"{name}@{k}": sum(METRICS[name](run.get(q, ()), qrels[q], k) for q in queries) / len(queries)
        for name, k in ks.items()
    }
