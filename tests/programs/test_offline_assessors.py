"""The offline relevance rule ("score and coverage") of the gathering loop and of the research program,
over a hand-made corpus whose BM25 ranking is known: "fracture" documents f0..f9 hold 10, 9, ... 1
occurrences of "fracture" in equal-length texts, so their scores fall off from f0."""

import asyncio

import pytest

from deepresearch.programs.stages.assessor import OfflineAssessor
from deepresearch.programs.stages.gathering import OfflineCandidateAssessor
from deepresearch.programs.stages.lexical import EVIDENCE_RULE
from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.signatures.types import Source, Task


@pytest.fixture(scope="module")
def retriever():
    docs = [
        Doc(doc_id=f"f{i}", title="bone note", text=" ".join(["fracture"] * (10 - i) + ["filler"] * i))
        for i in range(10)
    ]
    docs += [Doc(doc_id=f"z{i:02d}", title="other survey", text="lorem ipsum dolor sit amet") for i in range(30)]
    return BM25Retriever(Corpus(docs, name="toy"))


def judge(assessor, question, hits, subquery="fracture"):
    out = asyncio.run(assessor.acall(question=question, subquery=subquery, checklist="", hits=hits))
    return {j.source_id: j for j in out.judgements}


def test_gather_assessor_keeps_only_hits_close_to_the_best_score(retriever):
    hits = retriever.search("fracture", 10)
    best = hits[0].score
    judged = judge(OfflineCandidateAssessor(min_ratio=0.9, min_coverage=0.2), "does fracture heal?", hits)
    kept = {h.doc.doc_id for h in hits if judged[h.doc.doc_id].label == "relevant"}
    assert kept == {h.doc.doc_id for h in hits if h.score >= 0.9 * best}
    assert "f0" in kept and "f9" not in kept  # the rule discriminates: not everything, not nothing
    assert all(j.reason.startswith(EVIDENCE_RULE) for j in judged.values())


def test_gather_assessor_needs_the_question_terms_too(retriever):
    hits = retriever.search("fracture", 3)
    judged = judge(
        OfflineCandidateAssessor(min_ratio=0.0, min_coverage=0.5),
        "does fracture heal after vitamin supplementation?",
        hits,
    )
    # "fracture" is one of four key terms: 25% coverage, below the 50% asked for, whatever the score
    assert {j.label for j in judged.values()} == {"irrelevant"} and "covers 25%" in judged["f0"].reason


def test_a_later_page_is_measured_against_the_first_pages_best(retriever):
    assessor = OfflineCandidateAssessor(min_ratio=0.9, min_coverage=0.0)
    first, later = retriever.search("fracture", 2), retriever.search("fracture", 3, offset=5)
    judge(assessor, "fracture?", first)
    judged = judge(assessor, "fracture?", later)
    # alone, f5 would be its page's best and kept; against f0's score it falls short
    assert later[0].score < 0.9 * first[0].score and judged[later[0].doc.doc_id].label == "irrelevant"
    fresh = judge(OfflineCandidateAssessor(min_ratio=0.9, min_coverage=0.0), "fracture?", later)
    assert fresh[later[0].doc.doc_id].label == "relevant"


def test_thresholds_outside_zero_to_one_are_refused():
    with pytest.raises(ValueError, match="min_ratio"):
        OfflineCandidateAssessor(min_ratio=1.5)
    with pytest.raises(ValueError, match="uncertain_ratio"):
        OfflineAssessor(relevant_ratio=0.5, uncertain_ratio=0.7)


def test_research_assessor_applies_the_same_rule_with_an_uncertain_band(retriever):
    hits = retriever.search("fracture", 10)
    sources = [Source(source_id=h.doc.doc_id, title=h.doc.title, text=h.doc.text) for h in hits]
    scores = [h.score for h in hits]
    task = Task(query="fracture", goal="Find the main evidence on fractures")
    strict = asyncio.run(OfflineAssessor(keep_uncertain=False).acall(task=task, sources=sources, scores=scores))
    loose = asyncio.run(OfflineAssessor(keep_uncertain=True).acall(task=task, sources=sources, scores=scores))
    ratio = {h.doc.doc_id: h.score / scores[0] for h in hits}
    assert {s.source_id for s in strict.kept} == {d for d, r in ratio.items() if r >= 0.9}
    assert {s.source_id for s in loose.kept} == {d for d, r in ratio.items() if r >= 0.75}
    assert len(strict.kept) < len(loose.kept) < len(sources)
    assert all(j.reason.startswith(EVIDENCE_RULE) for j in loose.judgements)
