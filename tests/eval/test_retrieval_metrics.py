import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from deepresearch.eval.retrieval import average_precision, evaluate_run, ndcg_at_k, recall_at_k, reciprocal_rank
from deepresearch.retrievers import BM25Retriever
from deepresearch.retrievers.beir import load_qrels, load_queries


def test_ndcg_matches_scikit_learn_on_graded_labels():
    rng = np.random.default_rng(0)
    for _ in range(50):
        labels = rng.integers(0, 3, size=12)
        scores = rng.permutation(12).astype(float)  # distinct scores: no tie averaging
        ids = [f"d{i}" for i in range(12)]
        ranked = [ids[i] for i in np.argsort(-scores)]
        judged = {ids[i]: int(labels[i]) for i in range(12)}
        for k in (3, 10):
            expected = ndcg_score([labels], [scores], k=k) if labels.any() else 0.0
            assert ndcg_at_k(ranked, judged, k) == pytest.approx(expected)


def test_metrics_by_hand():
    judged = {"a": 1, "b": 2, "x": 0}
    ranked = ["x", "a", "c", "b"]
    assert recall_at_k(ranked, judged, 2) == 0.5
    assert reciprocal_rank(ranked, judged, 10) == 0.5
    assert reciprocal_rank(ranked, judged, 1) == 0.0
    assert average_precision(ranked, judged, 10) == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert ndcg_at_k(ranked, judged, 4) == pytest.approx((1 / np.log2(3) + 2 / np.log2(5)) / (2 + 1 / np.log2(3)))


def test_evaluate_run_averages_judged_queries_and_rejects_unknown_metrics():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    scores = evaluate_run({"q1": ["a"], "q2": ["c", "b"]}, qrels, {"mrr": 10})
    assert scores == {"mrr@10": pytest.approx(0.75)}
    with pytest.raises(ValueError, match="unknown metric 'p'"):
        evaluate_run({}, qrels, {"p": 5})


def test_bm25_reproduces_beir_scifact_ndcg(data_dir, scifact):
    # BEIR's published SciFact BM25 nDCG@10 is 0.665 (Elasticsearch, English analyzer, k1=1.2, b=0.75).
    qrels = load_qrels(data_dir / "scifact", "test")
    queries = load_queries(data_dir / "scifact")
    bm25 = BM25Retriever(scifact, k1=1.2, b=0.75, tokenizer="english", method="lucene", text_format="plain")
    run = {q: [h.doc.doc_id for h in bm25.search(queries[q], 100)] for q in qrels}
    assert evaluate_run(run, qrels, {"ndcg": 10})["ndcg@10"] == pytest.approx(0.665, abs=0.02)
