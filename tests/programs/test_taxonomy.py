"""TaxonomyBuilder with a scripted LM: guarantees, repairs, parse recovery, grouping.

Deep-research mode (the research program organising what it found) is in test_deliverables.py.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter

import dspy
import pytest

from deepresearch.programs.taxonomy.builder import TaxonomyBuilder, TaxonomyError, paper_cards, parse_tree_text
from deepresearch.signatures.taxonomy import BuildTaxonomy, MergeTaxonomies, PlacePapers, RepairJSON
from tests.scripted import chat_format, inputs_of, instructions_of


@pytest.fixture(scope="module")
def surveys(data_dir):
    with open(data_dir / "taxobench_examples" / "data_subset.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def titles_in(tree) -> Counter:
    out = Counter()

    def visit(node):
        assert not ("papers" in node and node.get("subtopics")), f"mixed node {node['name']}"
        out.update(node.get("papers", []))
        for child in node.get("subtopics", []):
            visit(child)

    visit(tree)
    return out


def assert_guarantees(tree, papers):
    assert isinstance(tree, dict) and "name" in tree
    assert titles_in(tree) == Counter(p["title"] for p in papers)
    assert json.loads(json.dumps(tree)) == tree


def papers_asked(messages):
    return json.loads(inputs_of(messages)["papers"])


def two_leaf_answer(messages):
    papers = papers_asked(messages)
    half = len(papers) // 2
    return {
        "taxonomy": {
            "name": inputs_of(messages)["topic"],
            "subtopics": [
                {"name": "First half", "papers": [p["paper_id"] for p in papers[:half]]},
                {"name": "Second half", "papers": [p["paper_id"] for p in papers[half:]]},
            ],
        }
    }


def test_bottom_up_tree_uses_exact_titles_and_needs_no_repair(surveys, make_lm, routed):
    survey = surveys[0]
    lm = make_lm(routed({BuildTaxonomy: two_leaf_answer}))
    with dspy.context(lm=lm):
        out = asyncio.run(TaxonomyBuilder().acall(topic=survey["survey_topic"], papers=survey["pdfs"]))
    assert_guarantees(out.tree, survey["pdfs"])
    assert out.repairs == [] and out.mode == "bottom-up" and lm.scripted.calls == 1
    assert [c["name"] for c in out.tree["subtopics"]] == ["First half", "Second half"]


def test_broken_answer_is_repaired_and_every_repair_recorded(surveys, make_lm, routed):
    papers = surveys[0]["pdfs"][:8]

    def broken(messages):
        ps = papers_asked(messages)
        return {
            "taxonomy": {
                "name": "Root",
                "subtopics": [
                    {
                        "name": "Mixed",
                        "papers": [ps[0]["paper_id"]],
                        "subtopics": [
                            {"name": "Inner", "papers": [ps[1]["title"] + ".", ps[2]["paper_id"], ps[2]["paper_id"]]}
                        ],
                    },
                    {"name": "Other", "papers": ["An Invented Paper That Does Not Exist", ps[3]["paper_id"]]},
                    {"name": "Empty", "subtopics": []},
                ],
            }
        }

    def place(messages):
        leaves = json.loads(inputs_of(messages)["leaves"])
        missing = papers_asked(messages)
        # one valid placement, one invented leaf (falls back to similarity), the rest unanswered
        return {
            "placements": [
                {"paper_id": missing[0]["paper_id"], "leaf": leaves[-1]},
                {"paper_id": missing[1]["paper_id"], "leaf": "No > Such > Leaf"},
            ]
        }

    lm = make_lm(routed({BuildTaxonomy: broken, PlacePapers: place}))
    with dspy.context(lm=lm):
        out = TaxonomyBuilder()(topic="Personalized alignment", papers=papers)
    assert_guarantees(out.tree, papers)
    kinds = Counter(r.kind for r in out.repairs)
    assert kinds["split_mixed"] == 1 and kinds["dropped_duplicate"] == 1 and kinds["dropped_unknown"] == 1
    assert kinds["removed_empty"] == 1 and kinds["placed_by_lm"] == 1
    assert kinds["placed_by_similarity"] == len(papers) - 4 - 1
    mixed = out.tree["subtopics"][0]
    assert [c["name"] for c in mixed["subtopics"]] == ["Mixed", "Inner"]  # papers moved into a leaf named after it
    assert mixed["subtopics"][1]["papers"][0] == papers[1]["title"]  # altered title mapped back to the exact one


def test_unparseable_answer_is_recovered_from_raw_text_then_by_the_repair_call(surveys, make_lm):
    papers = surveys[1]["pdfs"][:6]
    answers = {
        "fenced": lambda ids: (
            "[[ ## taxonomy ## ]]\nHere:\n```json\n"
            + json.dumps([{"name": "A", "papers": ids[:3]}, {"name": "B", "papers": ids[3:]}])
            + "\n```"
        ),
        "garbage": lambda ids: "[[ ## taxonomy ## ]]\nnot json at all",
    }

    for case, expected in (("fenced", {"json_parsed", "wrapped_root"}), ("garbage", {"json_repaired"})):

        def handler(messages):
            if instructions_of(messages).startswith(RepairJSON.instructions.splitlines()[0]):
                ids = [f"P{i + 1}" for i in range(len(papers))]
                return chat_format({"json_text": json.dumps({"name": "R", "papers": ids})})
            ids = [p["paper_id"] for p in papers_asked(messages)]
            return answers[case](ids)  # noqa: B023 - the handler answers within this iteration only

        lm = make_lm(handler)
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
            out = TaxonomyBuilder()(topic="Value alignment", papers=papers)
        assert_guarantees(out.tree, papers)
        assert expected <= {r.kind for r in out.repairs}, case


def test_failed_repair_falls_back_to_clustering(surveys, make_lm):
    papers = surveys[1]["pdfs"][:10]
    lm = make_lm(
        lambda messages: (
            "[[ ## taxonomy ## ]]\nnothing"
            if "taxonomy" in messages[0]["content"]
            else "[[ ## json_text ## ]]\nstill nothing"
        )
    )
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        out = TaxonomyBuilder()(topic="Value alignment", papers=papers)
    assert_guarantees(out.tree, papers)
    assert {"fix_failed", "clustered"} <= {r.kind for r in out.repairs}


def test_large_paper_sets_are_grouped_and_merged_not_truncated(surveys, make_lm, routed):
    papers = surveys[0]["pdfs"] + surveys[1]["pdfs"]  # 76 papers, at most 30 per prompt
    asked = []

    def build(messages):
        asked.append(len(papers_asked(messages)))
        return two_leaf_answer(messages)

    def merge(messages):
        cats = json.loads(inputs_of(messages)["categories"])
        ids = [c["category_id"] for c in cats]
        return {
            "taxonomy": {
                "name": "Merged",
                "subtopics": [
                    {"name": "Theme one", "subtopics": [{"name": "Joined", "papers": ids[:2]}]},
                    {"name": "Theme two", "papers": ids[2:-1]},
                ],
            }
        }  # the last category is left out

    lm = make_lm(routed({BuildTaxonomy: build, MergeTaxonomies: merge}))
    with dspy.context(lm=lm):
        out = TaxonomyBuilder(max_papers_per_call=30)(topic="Alignment", papers=papers)
    assert_guarantees(out.tree, papers)
    assert sorted(asked) == [25, 25, 26] and max(asked) <= 30
    kinds = Counter(r.kind for r in out.repairs)
    assert kinds["grouped"] == 1 and kinds["placed_by_similarity"] == 1  # the left-out category


def test_random_lm_answers_always_yield_valid_trees(surveys, make_lm, routed):
    papers = surveys[1]["pdfs"]
    rng = random.Random(5)

    def chaotic(messages):
        ps = papers_asked(messages)
        refs = [
            rng.choice([p["paper_id"], p["title"], p["title"].upper(), "Made up"]) for p in ps if rng.random() < 0.8
        ]
        refs += rng.sample(refs, k=min(3, len(refs)))

        def node(depth):
            if depth == 0 or rng.random() < 0.3:
                return {"name": f"n{rng.randint(0, 99)}", "papers": [refs.pop() for _ in range(min(len(refs), 4))]}
            kids = [node(depth - 1) for _ in range(rng.randint(1, 3))]
            extra = {"papers": [refs.pop()]} if refs and rng.random() < 0.3 else {}
            return {"name": f"n{rng.randint(0, 99)}", "subtopics": kids, **extra}

        return {"taxonomy": node(3)}

    lm = make_lm(routed({BuildTaxonomy: chaotic, PlacePapers: {"placements": []}}))
    with dspy.context(lm=lm):
        for _ in range(5):
            assert_guarantees(TaxonomyBuilder()(topic="Value alignment", papers=papers).tree, papers)


def test_offline_mode_and_input_checks(surveys):
    papers = surveys[0]["pdfs"][:12]
    out = TaxonomyBuilder(offline=True)(topic="Personalized alignment", papers=papers)
    assert_guarantees(out.tree, papers)
    with pytest.raises(TaxonomyError, match="topic is empty"):
        TaxonomyBuilder(offline=True)(topic=" ", papers=papers)
    with pytest.raises(TaxonomyError, match="no papers given.*taxonomy=True"):
        TaxonomyBuilder(offline=True)(topic="t")
    with pytest.raises(TaxonomyError, match="has no title"):
        paper_cards([{"title": ""}])
    assert [c.title for c in paper_cards(["A title", "a title.", "Another"])] == ["A title", "Another"]


def test_parse_tree_text_handles_fences_and_inner_quotes():
    assert parse_tree_text('x ```json\n{"name": "a", "papers": []}\n``` y') == {"name": "a", "papers": []}
    assert parse_tree_text('{"name": "The "best" topic", "papers": []}') == {"name": 'The "best" topic', "papers": []}
    assert parse_tree_text("no json") is None
    assert parse_tree_text('{"name": "a", "papers": ["P1", "P2"') == {"name": "a", "papers": ["P1", "P2"]}  # cut off
    assert parse_tree_text('[{"name": "a", "papers": ["P1",]},]') == [{"name": "a", "papers": ["P1"]}]
    assert parse_tree_text("we group {the papers} by method") is None  # braces in prose are not a tree


def test_named_predictors_are_stable():
    names = [n for n, _ in TaxonomyBuilder(offline=True).named_predictors()]
    assert names == ["build_taxonomy", "merge_taxonomies", "place_papers", "repair_json"]


def test_the_builder_runs_under_a_call_budget_and_a_deadline_and_still_places_every_paper(surveys, make_lm, routed):
    # 40 papers in groups of at most 10: four group calls and a merge; a budget of 2 calls builds two groups with
    # the LM, clusters the other two, and the merge falls back to keeping each group as a subtree
    papers = surveys[0]["pdfs"][:40]
    events = []
    lm = make_lm(routed({BuildTaxonomy: two_leaf_answer}))
    builder = TaxonomyBuilder(max_papers_per_call=10, max_lm_calls=2, on_event=events.append)
    with dspy.context(lm=lm):
        out = asyncio.run(builder.acall(topic=surveys[0]["survey_topic"], papers=papers))
    assert_guarantees(out.tree, papers)
    assert lm.scripted.calls == 2 and sum(r.kind == "budget" for r in out.repairs) == 2
    assert [e.kind for e in events][0] == "run_start" and events[-1].kind == "run_end"
    assert any(e.kind == "budget" and "LM call budget of 2" in e.message for e in events)
    # every call answers after 2 s; the deadline is 1 s: the whole set is clustered, and the tree still comes out
    slow = make_lm(routed({BuildTaxonomy: two_leaf_answer}), delay=2.0)
    with dspy.context(lm=slow):
        out = asyncio.run(TaxonomyBuilder(deadline_s=1.0).acall(topic=surveys[0]["survey_topic"], papers=papers))
    assert_guarantees(out.tree, papers)
    assert [r.kind for r in out.repairs] == ["deadline"]
