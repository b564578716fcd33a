"""Facility-location selection against hand-worked cases."""

import math

import numpy as np
import pytest

from deepresearch.programs.research.selector import facility_location, greedy, lazy_greedy, select, select_indices


def unit(deg):
    return np.array([math.cos(math.radians(deg)), math.sin(math.radians(deg))])


def toy_two():
    # A: cos 0.9 to the anchor, B: cos 0.3, cos(A, B) = 0.2
    similarity = np.array([[1.0, 0.2], [0.2, 1.0]])
    relevance = np.array([0.9, 0.3])
    return similarity, relevance


def test_alpha_pushes_selection_away_from_the_anchor_check_1():
    s, r = toy_two()
    assert facility_location(s, r, 0.6, [1]) == pytest.approx(1.54)
    assert facility_location(s, r, 0.6, [0]) == pytest.approx(1.20)
    assert greedy(s, r, 0.6, 1) == [1]
    assert facility_location(s, r, 0.0, [0]) == facility_location(s, r, 0.0, [1]) == pytest.approx(1.2)
    assert greedy(s, r, 0.0, 1) == [0]  # tie: lowest index


@pytest.mark.parametrize(
    "alpha,k,expected,values",
    [
        (0.6, 2, [3, 0], [3.5569, 4.3508]),
        (0.0, 2, [2, 4], [3.0088, 4.0088]),
        (0.3, 2, [2, 4], [3.0088, 4.0088]),
        (1.0, 2, [3, 4], None),
        (0.6, 3, [3, 0, 4], [3.5569, 4.3508, 4.8508]),
    ],
)
def test_five_unit_candidates_check_2(alpha, k, expected, values):
    e = np.stack([unit(d) for d in (0, 10, 60, 90, 150)])
    anchor = unit(0)
    assert select_indices(e, anchor, k, alpha) == expected
    if values:
        for i, v in enumerate(values):
            assert facility_location(e @ e.T, e @ anchor, alpha, expected[: i + 1]) == pytest.approx(v, abs=1e-4)
    assert facility_location(e @ e.T, e @ anchor, 0.6, []) == pytest.approx(0.9713, abs=1e-4)


def test_lazy_greedy_matches_plain_greedy_on_random_pools_check_3():
    rng = np.random.default_rng(7)
    for _ in range(100):
        n, k, alpha = int(rng.integers(2, 17)), int(rng.integers(1, 6)), float(rng.random())
        e = rng.normal(size=(n, 64))
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        a = rng.normal(size=64)
        a /= np.linalg.norm(a)
        assert lazy_greedy(e @ e.T, e @ a, alpha, k) == greedy(e @ e.T, e @ a, alpha, k)


def test_random_and_first_k_strategies_check_4():
    texts = [f"q{i}" for i in range(9)]
    a = select(texts, "anchor", 3, 0.6, strategy="random", seed=3)
    assert a == select(texts, "anchor", 3, 0.6, strategy="random", seed=3) and len(set(a)) == 3
    assert select(texts, "anchor", 3, 0.6, strategy="first_k") == [0, 1, 2]
    for strategy in ("submodular", "random", "first_k"):
        assert select(texts[:3], "anchor", 5, 0.6, strategy=strategy) == [0, 1, 2]
    with pytest.raises(ValueError, match="choose one of: submodular, random, first_k"):
        select(texts, "anchor", 2, 0.6, strategy="best")


def test_real_embeddings_prefer_distinct_queries_over_paraphrases():
    texts = [
        "vitamin D supplementation and hip fracture risk",
        "vitamin D supplements and risk of hip fractures",
        "calcium intake and bone mineral density in older women",
    ]
    chosen = select(texts, "Does vitamin D reduce fracture risk?", 2, 0.6)
    assert sorted(chosen) in ([0, 2], [1, 2])  # never both paraphrases
