import re

from programs.research.program import DeepResearch
from programs.runtime.citations import source_id_for

QUESTION = "Does vitamin D supplementation reduce fracture risk?"


def run(retriever, **kw):
    return DeepResearch(retriever=retriever, offline=True, **kw)(question=QUESTION)


def test_offline_runs_the_same_tree_and_cites_every_sentence(scifact, scifact_bm25):
    out = run(scifact_bm25, depth=2, breadth=3)
    assert out.stats.searches == out.stats.nodes >= 3 and out.stats.offline
    body = out.markdown.split("## References")[0]
    paragraphs = [p for p in body.split("\n\n") if p and not p.startswith(("#", "*", ">"))]
    sentences = [s for p in paragraphs for s in re.split(r"(?<=\]\.)\s+", p)]
    assert sentences and all(re.search(r"\[\d+\]\.$", s) for s in sentences)
    assert all(r.doc_id in scifact for r in out.references)
    # the planner's first task is built from the question's own key terms
    assert out.report.tree[0].query.startswith("vitamin d supplementation reduce fracture risk")
    assert out.usage == {}  # no LM was called


def test_offline_is_deterministic(scifact_bm25):
    a, b = run(scifact_bm25, depth=2, breadth=2), run(scifact_bm25, depth=2, breadth=2)
    assert a.markdown == b.markdown and a.report.tree == b.report.tree


def test_offline_learnings_quote_their_sources(scifact, scifact_bm25):
    out = run(scifact_bm25, depth=1, breadth=2)
    registry = {r.source_id: r.doc_id for r in out.references}
    assert out.learnings
    for learning in out.learnings:
        (sid,) = learning.source_ids
        doc_id = next(d for n in out.report.nodes() for d in n.retrieved_ids if source_id_for(d) == sid)
        assert learning.text in scifact.get(doc_id).text
        assert registry.get(sid, doc_id) == doc_id
