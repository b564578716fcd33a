"""The no-LLM taxonomy baseline: shape rule, guarantees and labels on the real TaxoBench papers."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from deepresearch.eval.taxonomy import score_survey
from deepresearch.eval.taxonomy_tree import tree_stats
from deepresearch.programs.taxonomy.offline import cluster_taxonomy, distinctive_terms, level_sizes


@pytest.fixture(scope="module")
def surveys(data_dir):
    with open(data_dir / "taxobench_examples" / "data_subset.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def trees(surveys):
    return [cluster_taxonomy(s["survey_topic"], s["pdfs"]) for s in surveys]


def walk(node):
    yield node
    for child in node.get("subtopics", []):
        yield from walk(child)


def test_shape_rule_follows_the_benchmark_statistics():
    assert level_sizes(38) == [10, 4, 2]  # 38 / 3.8 = 10 leaves, then /2.5 per level
    assert level_sizes(94) == [25, 10, 4, 2]
    assert level_sizes(14) == [4, 2]
    assert level_sizes(1) == [] and level_sizes(0) == []
    with pytest.raises(ValueError, match="branching > 1"):
        level_sizes(10, branching=1)


def test_every_paper_once_no_single_child_nodes_and_the_stated_shape(surveys, trees):
    for survey, tree in zip(surveys, trees):
        placed = Counter(t for n in walk(tree) for t in n.get("papers", []))
        assert placed == Counter(p["title"] for p in survey["pdfs"])
        assert tree["name"] == survey["survey_topic"]
        assert all(len(n["subtopics"]) >= 2 for n in walk(tree) if "subtopics" in n)
        assert not any("papers" in n and "subtopics" in n for n in walk(tree))
        stats = tree_stats(tree)
        assert stats["leaves"] == 10 and stats["depth"] <= 1 + len(level_sizes(38))


def test_labels_are_distinct_terms_of_their_cluster(surveys, trees):
    for survey, tree in zip(surveys, trees):
        text = {p["title"]: (p["title"] + " " + p["abs"]).lower() for p in survey["pdfs"]}
        for node in walk(tree):
            if "papers" in node:
                first = node["name"].split(", ")[0].lower()
                assert any(first in text[t] for t in node["papers"]), node["name"]
        siblings = [[c["name"] for c in n["subtopics"]] for n in walk(tree) if "subtopics" in n]
        assert all(len(set(names)) == len(names) for names in siblings)


def test_distinctive_terms_prefer_what_sets_a_group_apart():
    groups = [Counter({"reward": 5, "model": 5}), Counter({"decoding": 5, "model": 5})]
    assert distinctive_terms(groups, top=1) == [["reward"], ["decoding"]]


def test_tiny_inputs():
    assert cluster_taxonomy("T", []) == {"name": "T", "subtopics": []}
    one = cluster_taxonomy("T", [{"title": "Only paper", "abs": ""}])
    assert one == {"name": "T", "subtopics": [{"name": "Only paper", "papers": ["Only paper"]}]}
    two = cluster_taxonomy("T", [{"title": "Reward models", "abs": "x"}, {"title": "Decoding time", "abs": "y"}])
    assert sorted(t for n in walk(two) for t in n.get("papers", [])) == ["Decoding time", "Reward models"]


def test_baseline_beats_a_single_leaf_on_the_real_surveys(surveys, trees):
    for survey, tree in zip(surveys, trees):
        flat = {
            "name": survey["survey_topic"],
            "subtopics": [{"name": "All", "papers": [p["title"] for p in survey["pdfs"]]}],
        }
        ours, single = score_survey(survey["gt"], tree), score_survey(survey["gt"], flat)
        assert ours.leaf["ari"] > single.leaf["ari"] and ours.leaf["v"] > single.leaf["v"]
