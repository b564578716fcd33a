"""The default BM25 settings keep tokens with digits: gene, protein and virus names find their documents."""

import re

import pytest

from deepresearch.retrievers import BM25_PRESETS, BM25Retriever, Corpus, Doc
from deepresearch.retrievers.tokenize import english_tokenize, scholargym_tokenize


@pytest.fixture(scope="module")
def default_bm25(scifact):
    return BM25Retriever(scifact, **BM25_PRESETS["default"])


def holding(corpus, term: str) -> set[str]:
    pattern = re.compile(rf"(?<![a-z0-9]){re.escape(term.lower())}(?![a-z0-9])")
    return {d.doc_id for d in corpus if pattern.search(f"{d.title} {d.text}".lower())}


def test_digits_stay_in_tokens():
    assert english_tokenize("COVID-19, p53 and BRCA1 in H1N1") == ["covid", "19", "p53", "brca1", "h1n1"]
    assert scholargym_tokenize("COVID-19, p53 and BRCA1 in H1N1") == ["covid", "and", "in"]


@pytest.mark.parametrize("term", ["p53", "BRCA1", "H1N1", "HIV-1", "IL-6"])
def test_a_term_with_digits_finds_the_documents_holding_it(default_bm25, scifact, term):
    expected = holding(scifact, term)
    assert expected  # SciFact has 109 documents with p53, 13 with BRCA1, 3 with H1N1
    hits = default_bm25.search(term, 10)
    assert len(hits) >= min(10, len(expected))
    assert {h.doc.doc_id for h in hits[: min(10, len(expected))]} <= expected


@pytest.mark.parametrize("term", ["p53", "BRCA1", "H1N1"])
def test_the_scholargym_tokenizer_finds_none_of_them(scifact, term):
    assert BM25Retriever(scifact, **BM25_PRESETS["scholargym"]).search(term, 10) == []


def test_covid_19_finds_the_documents_about_it(scifact):
    about = [
        Doc(doc_id=f"covid{i}", title=title, text=text)
        for i, (title, text) in enumerate(
            [
                ("COVID-19 and vitamin D", "Vitamin D status of patients admitted with COVID-19."),
                ("Outcomes of COVID-19", "Mortality of COVID-19 in care homes during the first wave."),
                ("Remdesivir", "A trial of remdesivir for adults hospitalised with COVID-19 pneumonia."),
            ]
        )
    ]
    decoys = [Doc(doc_id="decoy", title="Day 19", text="Cells were counted on day 19 of culture, 19 times.")]
    corpus = Corpus(list(scifact)[:500] + decoys + about)
    hits = BM25Retriever(corpus, **BM25_PRESETS["default"]).search("COVID-19", 10)
    assert {h.doc.doc_id for h in hits[:3]} == {"covid0", "covid1", "covid2"}
