"""Passage-level citations: each passage has its own source id, a paper is one reference, the trace names passages."""

from __future__ import annotations

import json

from deepresearch.programs.artifacts import Hit, Reference, Report, as_source
from deepresearch.programs.citing.citations import (
    CITATION,
    CitationRegistry,
    citation_labels,
    renumber_citations,
    source_id_for,
)
from deepresearch.retrievers.passages import passage_docs
from deepresearch.retrievers.types import Doc
from deepresearch.signatures.types import Learning

TEXT = " ".join(f"Sentence {i} reports result {i * 3} for group {chr(65 + i % 26)}." for i in range(40))


def papers():
    smith = passage_docs(Doc("smith2020", "Vitamin D trial", TEXT, year=2020, metadata={"doi": "10.1234/vd"}), 300, 50)
    lee = Doc("lee2019", "Calcium review", "Calcium alone did not help.", year=2019)  # a whole document (abstract)
    return smith, lee


def test_passage_source_ids_share_the_paper_hash_and_end_in_the_passage_number():
    smith, lee = papers()
    ids = [source_id_for(d.doc_id) for d in smith]
    assert len({i.split("_")[0] for i in ids}) == 1 and [i.split("_")[1] for i in ids] == [
        str(n) for n in range(1, len(smith) + 1)
    ]
    assert ids[0].split("_")[0] == source_id_for("smith2020").split("_")[0]
    assert source_id_for(lee.doc_id).endswith("_1")  # abstracts as before
    match = CITATION.search(f"Shown [{ids[2]}; {source_id_for(lee.doc_id)}].")
    assert citation_labels(match) == [ids[2], source_id_for(lee.doc_id)]


def test_passages_of_one_paper_are_one_reference():
    smith, lee = papers()
    registry = CitationRegistry()
    s1, s3, s4 = (registry.register(smith[i]) for i in (0, 2, 3))
    other = registry.register(lee)
    draft = f"Rates fell [{s3}]. Calcium did not help [{other}; {s1}]. Again [{s4}; {s3}]."
    out = renumber_citations(draft, registry)
    assert out.markdown == "Rates fell [1]. Calcium did not help [2][1]. Again [1]."
    smith_ref, lee_ref = out.references
    assert (smith_ref.number, smith_ref.doc_id, smith_ref.source_id) == (1, "smith2020", s3)
    assert smith_ref.passages == (s3, s1, s4) and smith_ref.doi == "10.1234/vd"
    assert (lee_ref.doc_id, lee_ref.passages, lee_ref.source_id) == ("lee2019", (), other)
    assert smith_ref.render() == "[1] Vitamin D trial (2020). https://doi.org/10.1234/vd"


def test_the_trace_names_the_passages_and_abstract_references_are_unchanged():
    smith, lee = papers()
    registry = CitationRegistry()
    s2, other = registry.register(smith[1]), registry.register(lee)
    out = renumber_citations(f"Rates fell [{s2}]. No help [{other}].\n\n## References\n", registry)
    learnings = (Learning(text="Rates fell", source_ids=[s2]), Learning(text="No help", source_ids=[other]))
    report = Report(question="q", markdown=out.markdown, references=out.references, learnings=learnings, tree=())
    d = json.loads(json.dumps(report.to_dict()))
    first = d["provenance"][0]
    assert first["sources"] == [{"number": 1, "source_id": s2, "doc_id": "smith2020#2", "title": "Vitamin D trial"}]
    assert first["learnings"][0]["source_ids"] == [s2]
    assert d["provenance"][1]["sources"][0]["doc_id"] == "lee2019"
    assert "passages" not in d["references"][1] and d["references"][0]["passages"] == [s2]
    assert Report.from_dict(d).references == out.references
    assert Reference.from_dict(d["references"][0]).passages == (s2,)


def test_the_lm_sees_which_passage_it_reads():
    smith, lee = papers()
    source = as_source(Hit(smith[1], 1.0, 1), "x_2")
    assert source.title == f"Vitamin D trial (passage 2 of {len(smith)})" and source.text == smith[1].text
    assert as_source(Hit(lee, 1.0, 1), "y_1").title == "Calcium review"


def test_a_paper_read_as_passages_is_one_relevant_paper():
    from deepresearch.programs.artifacts import Node
    from deepresearch.programs.research.deliverables import relevant_docs

    smith, lee = papers()
    registry = CitationRegistry()
    for d in (smith[0], smith[2], lee):
        registry.register(d)
    roots = [
        Node("1", 1, 1, "q", "g", relevant_ids=(smith[2].doc_id, lee.doc_id)),
        Node("2", 1, 1, "q", "g", relevant_ids=(smith[0].doc_id,)),
    ]
    assert [d.doc_id for d in relevant_docs(roots, registry)] == [smith[2].doc_id, lee.doc_id]
