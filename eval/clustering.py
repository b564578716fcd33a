"""Agreement of two partitions of the same items: adjusted Rand index and V-measure (with its parts).

Exact on small integer contingency tables; they agree with scikit-learn's `adjusted_rand_score` and
`homogeneity_completeness_v_measure` (tests/eval/test_taxonomy_metrics.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from deepresearch.eval.f1 import harmonic_mean


def _contingency(labels_true: Sequence[Any], labels_pred: Sequence[Any]) -> np.ndarray:
    if len(labels_true) != len(labels_pred):
        raise ValueError(f"label lists differ in length: {len(labels_true)} vs {len(labels_pred)}")
    rows = {x: i for i, x in enumerate(dict.fromkeys(labels_true))}
    cols = {x: i for i, x in enumerate(dict.fromkeys(labels_pred))}
    table = np.zeros((len(rows), len(cols)), dtype=np.int64)
    for t, p in zip(labels_true, labels_pred):
        table[rows[t], cols[p]] += 1
    return table


def _pairs(x: int) -> int:
    return x * (x - 1) // 2


def adjusted_rand_index(labels_true: Sequence[Any], labels_pred: Sequence[Any]) -> float:
    """ARI = (Index - Expected) / (Max - Expected), in exact integer arithmetic; 1.0 when Max = Expected."""
    table = _contingency(labels_true, labels_pred)
    index = sum(_pairs(int(x)) for x in table.ravel())
    sum_a = sum(_pairs(int(x)) for x in table.sum(axis=1))
    sum_b = sum(_pairs(int(x)) for x in table.sum(axis=0))
    total = _pairs(len(labels_true))
    # Multiply through by 2 * C(N, 2) so every term is an integer.
    numerator = 2 * (index * total - sum_a * sum_b)
    denominator = (sum_a + sum_b) * total - 2 * sum_a * sum_b
    return 1.0 if denominator == 0 else numerator / denominator


def _entropy(counts: np.ndarray) -> float:
    n = counts.sum()
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum()) if n else 0.0


def homogeneity_completeness_v(labels_true: Sequence[Any], labels_pred: Sequence[Any]) -> tuple[float, float, float]:
    """HOM = I/H(U*), COMP = I/H(Û) (1 when the entropy is 0), V their harmonic mean; natural log."""
    if not labels_true:
        return 1.0, 1.0, 1.0
    table = _contingency(labels_true, labels_pred).astype(np.float64)
    n = table.sum()
    a, b = table.sum(axis=1), table.sum(axis=0)
    nz = table > 0
    outer = np.outer(a, b)
    mutual = float((table[nz] / n * (np.log(table[nz] * n) - np.log(outer[nz]))).sum())
    h_true, h_pred = _entropy(a), _entropy(b)
    hom = mutual / h_true if h_true else 1.0
    comp = mutual / h_pred if h_pred else 1.0
    return hom, comp, harmonic_mean(hom, comp)
