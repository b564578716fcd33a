"""TaxoBench metrics: synthetic checks, scikit-learn parity, and the real instances."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy.stats import spearmanr

from deepresearch.eval.f1 import harmonic_mean
from deepresearch.eval.taxonomy import (
    UNRETRIEVED,
    EmbeddingSim,
    align_titles,
    exact_sim,
    leaf_scores,
    path_cost,
    path_score,
    score_survey,
    soft_recall_precision,
    summarize,
    us_ted,
)


def one_sim(xs, ys):
    """Every pair of labels is identical (isolates structure from wording)."""
    return np.ones((len(xs), len(ys)), dtype=np.float64)


def node(name, *children):
    return {"name": name, "subtopics": list(children)} if children else {"name": name, "papers": []}


def leaf(name, *papers):
    return {"name": name, "papers": list(papers)}


def random_tree(rng: random.Random, depth: int, words: list[str]):
    if depth == 0 or rng.random() < 0.3:
        return node(rng.choice(words))
    return node(rng.choice(words), *[random_tree(rng, depth - 1, words) for _ in range(rng.randint(1, 3))])


def shuffled(tree, rng):
    kids = [shuffled(c, rng) for c in tree.get("subtopics", [])]
    rng.shuffle(kids)
    return {**tree, "subtopics": kids} if kids else tree


# -------------------------------------------------------------- US-TED / US-NTED


def test_identical_trees_have_zero_distance_and_sibling_order_does_not_matter():
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    for _ in range(30):
        tree = random_tree(rng, 4, words)
        assert us_ted(tree, tree, exact_sim) == (0.0, 0.0)
        other = random_tree(rng, 4, words)
        assert us_ted(tree, other, exact_sim) == us_ted(shuffled(tree, rng), shuffled(other, rng), exact_sim)


def test_extra_intermediate_level_is_charged_as_subtree_delete_and_insert():
    expert, model = node("R", node("X"), node("Y")), node("R", node("M", node("X"), node("Y")))
    assert us_ted(expert, model, one_sim) == pytest.approx((3, 3 / 7))
    assert us_ted(expert, model, exact_sim) == pytest.approx((4, 4 / 7))


def test_two_swapped_leaves_cost_two_renames():
    expert = node("R", node("A", node("B"), node("C")), node("D", node("E"), node("F")))
    model = node("R", node("A", node("B"), node("E")), node("D", node("C"), node("F")))
    assert us_ted(expert, model, exact_sim) == pytest.approx((2, 2 / 14))


def test_normalised_distance_is_bounded_on_random_pairs():
    rng = random.Random(7)
    words = ["a", "b", "c", "d"]
    for _ in range(300):
        t1, t2 = random_tree(rng, 4, words), random_tree(rng, 4, words)
        ted, nted = us_ted(t1, t2, exact_sim)
        size = len(json.dumps(t1).split('"name"')) - 1 + len(json.dumps(t2).split('"name"')) - 1
        assert 0.0 <= nted <= 1.0
        assert ted <= size - 1


def test_unrelated_labels_on_the_same_shape_cost_at_most_half():
    expert = node("R", node("A", node("B")), node("C"))
    model = node("S", node("X", node("Y")), node("Z"))
    assert us_ted(expert, model, exact_sim)[1] == pytest.approx(0.5)


# -------------------------------------------------------------- SEM-PATH


@pytest.mark.parametrize("sim", [one_sim, exact_sim])
def test_skipped_level_costs_one(sim):
    assert path_cost(["R", "A"], ["R", "X", "A"], sim) == pytest.approx(1.0)
    assert path_score([["R", "A"]], [["R", "X", "A"]], sim) == pytest.approx(0.5)


def test_path_costs_of_the_spec_examples():
    assert path_score([["R", "A"]], [["R", "A"]], exact_sim) == 1.0
    assert path_cost(["R", "A"], ["R", "B"], exact_sim) == pytest.approx(1.0)
    assert path_cost(["R", "A"], ["Q", "X", "Y", "A"], exact_sim) == pytest.approx(3.0)
    assert path_score([["R", "A"]], [["Q", "X", "Y", "A"]], exact_sim) == pytest.approx(0.25)
    assert path_score([[]], [["R"]], exact_sim) == 0.0
    assert path_score([], [["R"]], exact_sim) == 0.0


def test_several_paths_take_the_best_pair():
    assert path_score([["R", "A"]], [["R", "B"], ["R", "A"]], exact_sim) == 1.0


# -------------------------------------------------------------- NSR / NSP


def test_soft_recall_precision_of_a_permutation_is_one():
    out = soft_recall_precision(["a", "b", "c", "b"], ["b", "c", "b", "a"], exact_sim)
    assert out["nsr"] == pytest.approx(1.0) and out["nsp"] == pytest.approx(1.0)


def test_soft_recall_precision_counterexample():
    table = {("a", "b1"): 1, ("a", "b2"): 1, ("b1", "b2"): 0}

    def sim(xs, ys):
        return np.array([[1.0 if x == y else table.get((x, y), table.get((y, x))) for y in ys] for x in xs])

    out = soft_recall_precision(["a"], ["b1", "b2"], sim)
    assert out["nsr"] == pytest.approx(5 / 3) and out["nsp"] == pytest.approx(5 / 6)


# -------------------------------------------------------------- ARI / V


def test_ari_and_v_on_hand_made_labelings():
    assert leaf_scores([0, 0, 1, 1], [0, 0, 1, 2]) == pytest.approx(
        {"ari": 0.5714, "hom": 1.0, "comp": 0.6667, "v": 0.8}, abs=1e-4
    )
    assert leaf_scores([0, 0, 0, 0], [0, 1, 2, 3])["ari"] == 0.0
    assert leaf_scores([0, 1, 2], [0, 1, 2])["ari"] == 1.0
    assert leaf_scores([5, 5, 5], ["x", "x", "x"]) == {"ari": 1.0, "hom": 1.0, "comp": 1.0, "v": 1.0}


def test_end_to_end_view_gives_unretrieved_papers_one_shared_label():
    true = [0, 0, 0, 1, 1, 1]
    shared = ["c", "c"] + [UNRETRIEVED] * 4
    scores = leaf_scores(true, shared)
    assert scores == pytest.approx({"ari": 0.3243, "hom": 0.4591, "comp": 0.5, "v": 0.4787}, abs=1e-4)
    assert leaf_scores(true, ["c", "c", "u1", "u2", "u3", "u4"])["ari"] == pytest.approx(0.1935, abs=1e-4)
    assert leaf_scores([0, 0], ["c", "c"])["ari"] == 1.0
    assert leaf_scores([0], ["c"]) == {"ari": 0.0, "hom": 0.0, "comp": 0.0, "v": 0.0}


def test_end_to_end_and_intersection_views_of_a_survey():
    expert = node("R", leaf("A", "p1", "p2", "p3"), leaf("B", "p4", "p5", "p6"))
    model = node("R", leaf("c", "p1", "p2"))
    s = score_survey(expert, model, sim=exact_sim)
    assert s.leaf_e2e == pytest.approx({"ari": 0.3243, "hom": 0.4591, "comp": 0.5, "v": 0.4787}, abs=1e-4)
    assert s.leaf["ari"] == 1.0 and s.aligned == 2 and s.dropped == 4
    assert s.retrieval == pytest.approx({"recall": 2 / 6, "precision": 1.0, "f1": 0.5})


# -------------------------------------------------------------- alignment


def test_title_alignment_thresholds_and_one_to_one():
    long_title = "Toolformer: Language Models Can Teach Themselves to Use Tools"
    assert align_titles(["Toolformer"], [long_title]).pairs == ()
    assert align_titles([long_title], [long_title + "."]).pairs == ((0, 0),)
    twice = align_titles([long_title, long_title], [long_title])
    assert twice.pairs == ((0, 0),) and twice.unmatched_expert == (long_title,)
    # containment between 0.6 and 1: a subtitle dropped
    assert align_titles(["Deep Residual Learning"], ["Deep Residual Learning for Images"]).pairs == ((0, 0),)


def test_best_candidate_failing_containment_leaves_the_expert_paper_unmatched():
    # the best-ratio candidate is not contained; a worse but containing one is not tried
    expert = ["Graph Neural Networks"]
    model = ["Graph Neural Netwerks", "Graph Neural Networks: a survey"]  # ratios 0.95 (not contained), 0.86
    assert align_titles(expert, model).pairs == ()


def test_public_scorer_profile_accepts_containment_and_high_ratio():
    assert align_titles(
        ["Toolformer"], ["Toolformer: Language Models Can Teach Themselves"], profile="public_scorer"
    ).pairs == ((0, 0),)
    with pytest.raises(ValueError, match="choose one of"):
        align_titles(["a"], ["a"], profile="nope")


# -------------------------------------------------------------- retrieval F1 from TaxoBench's tables


TABLE2 = {
    "o3": (20.92, 29.29, 24.41),
    "Grok": (12.82, 29.35, 17.85),
    "Gemini": (15.23, 18.92, 16.88),
    "Perplexity": (6.61, 7.47, 7.01),
    "DeepSeek": (4.61, 14.26, 6.97),
    "Qwen": (4.35, 7.94, 5.62),
    "Doubao": (3.15, 3.83, 3.46),
}
TABLE3_SEM_PATH = {
    "o3": 30.25,
    "Grok": 29.60,
    "Gemini": 26.79,
    "Perplexity": 25.72,
    "DeepSeek": 17.50,
    "Qwen": 20.53,
    "Doubao": 18.93,
}


def test_table_f1_is_the_harmonic_mean_of_averaged_precision_and_recall():
    for recall, precision, f1 in TABLE2.values():
        assert harmonic_mean(precision, recall) == pytest.approx(f1, abs=0.01)
    rho, p = spearmanr([TABLE2[a][2] for a in TABLE2], [TABLE3_SEM_PATH[a] for a in TABLE2])
    assert rho == pytest.approx(0.8929, abs=1e-4) and p == pytest.approx(0.0068, abs=1e-4)


def test_summary_reports_f1_of_averages_and_mean_of_f1():
    expert = node("R", leaf("A", "p1", "p2"))
    full = score_survey(expert, node("R", leaf("A", "p1", "p2")), sim=exact_sim)
    half = score_survey(expert, node("R", leaf("A", "p1", "x", "y", "z")), sim=exact_sim)
    table = summarize([full, half])
    recall, precision = (100 + 50) / 2, (100 + 25) / 2
    assert table["f1"] == pytest.approx(2 * recall * precision / (recall + precision))
    assert table["f1_mean"] == pytest.approx((100 + 100 * harmonic_mean(0.5, 0.25)) / 2)
    assert table["surveys"] == 2


# -------------------------------------------------------------- edge cases


def test_failed_or_empty_prediction_scores_zero_leaf_and_path():
    expert = node("Survey", node("A", leaf("A1", "p1", "p2")), leaf("B", "p3"))
    for pred in ("FIX FAILED", {"name": "Survey", "subtopics": []}, None):
        s = score_survey(expert, pred, topic="Survey", sim=exact_sim)
        assert s.aligned == 0 and s.sem_path == 0.0 and s.leaf["ari"] == 0.0
        assert s.us_ted == pytest.approx(3.0)  # the expert subtrees A(A1) and B inserted; roots equal
        assert s.retrieval["f1"] == 0.0


def test_single_leaf_prediction():
    expert = node("R", leaf("A", "p1", "p2"), leaf("B", "p3", "p4"))
    s = score_survey(expert, leaf("R", "p1", "p2", "p3", "p4"), sim=exact_sim)
    assert s.leaf["ari"] == 0.0 and s.leaf["hom"] == 0.0 and s.leaf["comp"] == 1.0
    assert s.us_ted == pytest.approx(2.0)
    assert s.sem_path == pytest.approx(0.5)  # (R, A) vs (R): one skipped level


def test_duplicate_titles_in_a_prediction_keep_the_last_leaf():
    expert = node("R", leaf("A", "p1", "p2"), leaf("B", "p3", "p4"))
    model = node("R", leaf("A", "p1", "p2", "p3"), leaf("B", "p3", "p4"))
    s = score_survey(expert, model, sim=exact_sim)
    assert s.aligned == 4 and s.n_model == 4
    assert s.leaf["ari"] == 1.0
    assert s.sem_path == 1.0  # p3's best path pair matches exactly


def test_retrieved_papers_override_tree_titles_for_retrieval():
    expert = node("R", leaf("A", "p1", "p2"))
    s = score_survey(expert, node("R", leaf("A", "p1")), retrieved=["p1", "p2", "q"], sim=exact_sim)
    assert s.retrieval["recall"] == 1.0 and s.retrieval["precision"] == pytest.approx(2 / 3)
    assert s.leaf_e2e["ari"] == 0.0  # p2 retrieved but not placed in the tree shares the ⊥ label with nobody


# -------------------------------------------------------------- real instances


REAL = {  # id: (model titles, aligned, cats GT/model, depth, leaves, ARI, HOM, COMP, V)
    1: (37, 37, (11, 27), (4, 3), (7, 19), 0.1539, 0.8147, 0.5319, 0.6436),
    2: (38, 38, (31, 32), (6, 3), (18, 23), 0.1822, 0.8457, 0.7711, 0.8067),
}
REAL_SIM = {  # id: (TED one, NTED one, TED exact, NTED exact, SEM one, SEM exact, NSR exact, NSP exact)
    1: (30, 0.7895, 34, 0.8947, 0.5000, 0.2000, 0.0, 0.0),
    2: (53, 0.8413, 57, 0.9048, 0.3465, 0.2031, 0.0333, 0.0312),
}


@pytest.fixture(scope="module")
def raw_examples(data_dir):
    with open(data_dir / "taxobench_examples" / "outputs_examples.raw.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_real_instances_reproduce_the_spec_table(raw_examples):
    for ex in raw_examples:
        n_model, aligned, cats, depth, leaves, ari, hom, comp, v = REAL[ex["id"]]
        ted1, nted1, ted_x, nted_x, sem1, sem_x, nsr, nsp = REAL_SIM[ex["id"]]
        one = score_survey(ex["gt"], ex["hierarchy_tree"], sim=one_sim)
        exact = score_survey(ex["gt"], ex["hierarchy_tree"], sim=exact_sim)
        assert (one.n_expert, one.n_model, one.aligned) == (38, n_model, aligned)
        assert (one.expert_stats["categories"], one.model_stats["categories"]) == cats
        assert (one.expert_stats["depth"], one.model_stats["depth"]) == depth
        assert (one.expert_stats["leaves"], one.model_stats["leaves"]) == leaves
        assert one.leaf == pytest.approx({"ari": ari, "hom": hom, "comp": comp, "v": v}, abs=6e-5)
        assert (one.us_ted, one.us_nted) == pytest.approx((ted1, nted1), abs=6e-5)
        assert (exact.us_ted, exact.us_nted) == pytest.approx((ted_x, nted_x), abs=6e-5)
        assert (one.sem_path, exact.sem_path) == pytest.approx((sem1, sem_x), abs=6e-5)
        assert (exact.soft["nsr"], exact.soft["nsp"]) == pytest.approx((nsr, nsp), abs=6e-5)


def test_real_instance_one_end_to_end_view_and_retrieval(raw_examples):
    ex = next(e for e in raw_examples if e["id"] == 1)
    s = score_survey(ex["gt"], ex["hierarchy_tree"], sim=exact_sim)
    assert s.unmatched_expert == ["Personalized Language Modeling from Personalized Human Feedback"]
    assert s.leaf_e2e == pytest.approx({"ari": 0.1514, "hom": 0.8209, "comp": 0.5311, "v": 0.6450}, abs=6e-5)
    assert s.retrieval["recall"] == pytest.approx(0.9737, abs=5e-5) and s.retrieval["precision"] == 1.0


def test_embedding_similarity_is_clipped_and_identical_trees_score_perfectly(raw_examples):
    sim = EmbeddingSim()
    m = sim(["reward modeling", "reward modeling", "zebra"], ["reward modeling", "quantum chromodynamics"])
    assert m.shape == (3, 2) and (m >= 0).all() and (m <= 1).all()
    assert m[0, 0] == pytest.approx(1.0, abs=1e-5)
    gt = raw_examples[0]["gt"]
    s = score_survey(gt, gt, sim=sim)
    assert s.us_nted == pytest.approx(0.0, abs=1e-5) and s.sem_path == pytest.approx(1.0, abs=1e-5)
    assert s.leaf["ari"] == 1.0 and s.leaf["v"] == pytest.approx(1.0)
