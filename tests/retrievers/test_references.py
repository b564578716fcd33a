"""Reference files as corpora: BibTeX, RIS and CSV exports, bad entries skipped with a count and a line."""

from __future__ import annotations

import logging

import pytest

from deepresearch.retrievers.bibliographic import bibliographic
from deepresearch.retrievers.corpus import CorpusError
from deepresearch.retrievers.open import open_retriever
from deepresearch.retrievers.references import load_references
from deepresearch.retrievers.sources import open_corpus

BIB = """% exported from a reference manager
@article{lopez2021,
  title = {{Vitamin D} and fracture risk in older adults},
  author = {Lopez, Ana and Ode, Ben},
  journal = {Bone Journal},
  year = {2021},
  doi = {10.1234/bone.2021.7},
  abstract = {Supplementation lowered hip fracture rates over three years.}
}

@inproceedings{nap2019,
  author = {Kim, Soo},
  year = {2019},
  booktitle = {Sleep Conference}
}

@article{sleep2018,
  title = {Sleep deprivation and memory},
  author = {Rao, Priya},
  year = {2018}
}
"""

RIS = """TY  - JOUR
TI  - Vitamin D and fracture risk in older adults
AU  - Lopez, Ana
AU  - Ode, Ben
PY  - 2021/04/07
JO  - Bone Journal
DO  - 10.1234/bone.2021.7
AB  - Supplementation lowered hip fracture rates
  over three years.
ER  -

TY  - JOUR
AU  - Nobody, N.
PY  - 2020
ER  -

TY  - JOUR
TI  - Sleep deprivation and memory
PY  - twenty
ER  -

TY  - CONF
TI  - Coffee and alertness
ER  -
"""

CSV = """Title,Abstract,Year,Authors,DOI
Vitamin D and fracture risk in older adults,Supplementation lowered hip fracture rates.,2021,Lopez A; Ode B,10.1234/bone.2021.7
,An entry with no title,2020,,
"Sleep deprivation, memory and students",Deprivation impairs consolidation.,2018,Rao P,
Coffee and alertness,Caffeine helps.,soon,,
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bibtex_entries_become_documents(tmp_path, caplog):
    path = write(tmp_path, "refs.bib", BIB)
    with caplog.at_level(logging.WARNING):
        docs, skipped = load_references(path)
    assert [d.doc_id for d in docs] == ["lopez2021", "sleep2018"] and skipped == 1
    d = docs[0]
    assert d.title == "Vitamin D and fracture risk in older adults" and d.year == 2021
    assert d.text == "Supplementation lowered hip fracture rates over three years."
    bib = bibliographic(d)
    assert bib.doi == "10.1234/bone.2021.7" and bib.venue == "Bone Journal" and len(bib.authors) == 2
    assert docs[1].text == ""  # no abstract: found by its title
    assert "refs.bib: skipped 1 bad entries (first at line 11: no title)" in caplog.text


def test_ris_records_with_wrapped_lines_and_bad_ones(tmp_path, caplog):
    path = write(tmp_path, "refs.ris", RIS)
    with caplog.at_level(logging.WARNING):
        docs, skipped = load_references(path)
    assert [d.title for d in docs] == ["Vitamin D and fracture risk in older adults", "Coffee and alertness"]
    assert skipped == 2
    assert docs[0].text == "Supplementation lowered hip fracture rates over three years."
    assert docs[0].doc_id == "10.1234/bone.2021.7" and docs[0].published == "2021"
    assert bibliographic(docs[0]).authors == ("Ana Lopez", "Ben Ode")
    assert "refs.ris: skipped 2 bad entries (first at line 12: no title)" in caplog.text


def test_ris_record_without_end_tag_is_bad(tmp_path):
    path = write(tmp_path, "cut.ris", "TY  - JOUR\nTI  - First\nTY  - JOUR\nTI  - Second\nER  -\n")
    docs, skipped = load_references(path)
    assert [d.title for d in docs] == ["Second"] and skipped == 1


def test_csv_rows_with_a_header(tmp_path, caplog):
    path = write(tmp_path, "refs.csv", CSV)
    with caplog.at_level(logging.WARNING):
        docs, skipped = load_references(path)
    assert [d.title for d in docs] == [
        "Vitamin D and fracture risk in older adults",
        "Sleep deprivation, memory and students",
    ]
    assert skipped == 2 and docs[0].year == 2021 and bibliographic(docs[0]).doi == "10.1234/bone.2021.7"
    assert docs[0].metadata["authors"] == ["Lopez A", "Ode B"]
    assert "refs.csv: skipped 2 bad entries (first at line 3: no title)" in caplog.text


def test_csv_without_a_title_column_is_refused(tmp_path):
    path = write(tmp_path, "x.csv", "name,abstract\na,b\n")
    with pytest.raises(CorpusError, match="no 'title' column"):
        load_references(path)


def test_a_file_with_no_usable_entry_says_so(tmp_path):
    path = write(tmp_path, "empty.ris", "TY  - JOUR\nAU  - A\nER  -\n")
    with pytest.raises(CorpusError, match=r"empty.ris: skipped 1 bad entries \(first at line 1: no title\); no usable"):
        load_references(path)


@pytest.mark.parametrize("name,text", [("refs.bib", BIB), ("refs.ris", RIS), ("refs.csv", CSV)])
def test_reference_files_are_corpus_specs(tmp_path, name, text):
    path = write(tmp_path, name, text)
    _, source, skipped = open_corpus(str(path))
    assert source == {"kind": "refs", "path": str(path.resolve())} and skipped == 2 - (name == "refs.bib")
    hits = open_retriever(str(path)).retriever.search("hip fracture vitamin", 1)
    assert hits[0].doc.title == "Vitamin D and fracture risk in older adults"
