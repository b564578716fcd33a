"""Bibliographic fields from the record shapes corpora use (arXiv, Semantic Scholar, OpenAlex, Crossref, BibTeX)."""

import json

import pytest

from deepresearch.retrievers.bibliographic import Bibliographic, author_names, bibliographic, normalize_doi
from deepresearch.retrievers.corpus import doc_from_record, load_corpus
from deepresearch.retrievers.scholargym import load_paper_db
from deepresearch.retrievers.types import Doc

# The record shapes below carry the real metadata of two papers (NumPy, Nature 2020; BERT, NAACL 2019).
NUMPY_AUTHORS = ("Charles R. Harris", "K. Jarrod Millman", "Stéfan J. van der Walt", "Ralf Gommers")
NUMPY_DOI = "10.1038/s41586-020-2649-2"
BERT_AUTHORS = ("Jacob Devlin", "Ming-Wei Chang", "Kenton Lee", "Kristina Toutanova")
BERT_DOI = "10.18653/v1/N19-1423"


def doc(**record):
    return doc_from_record({"_id": "1", "title": "t", "text": "x", **record}, "test")


def test_arxiv_metadata_record():
    # the first record of arXiv's metadata snapshot, as its JSON lines give it
    d = doc_from_record(
        {
            "id": "0704.0001",
            "title": "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies",
            "abstract": "A fully differential calculation in perturbative quantum chromodynamics is presented.",
            "authors": "C. Bal\\'azs, E. L. Berger, P. M. Nadolsky, C.-P. Yuan",
            "journal-ref": "Phys.Rev.D76:013009,2007",
            "doi": "10.1103/PhysRevD.76.013009",
            "authors_parsed": [
                ["Balázs", "C.", ""],
                ["Berger", "E. L.", ""],
                ["Nadolsky", "P. M.", ""],
                ["Yuan", "C. -P.", ""],
            ],
        },
        "arxiv",
    )
    bib = bibliographic(d)
    assert bib.authors == ("C. Bal\\'azs", "E. L. Berger", "P. M. Nadolsky", "C.-P. Yuan")
    assert (bib.venue, bib.doi, bib.url) == ("Phys.Rev.D76:013009,2007", "10.1103/PhysRevD.76.013009", None)


def test_semantic_scholar_record():
    d = doc(
        externalIds={"DOI": BERT_DOI, "ArXiv": "1810.04805", "CorpusId": 52967399},
        venue="North American Chapter of the Association for Computational Linguistics",
        authors=[{"authorId": "39172707", "name": n} for n in BERT_AUTHORS],
        journal={"name": ""},
    )
    assert bibliographic(d) == Bibliographic(
        authors=BERT_AUTHORS,
        venue="North American Chapter of the Association for Computational Linguistics",
        doi=BERT_DOI,
        url="https://arxiv.org/abs/1810.04805",
    )


def test_openalex_record():
    d = doc(
        doi=f"https://doi.org/{NUMPY_DOI}",
        authorships=[{"author": {"display_name": n}} for n in NUMPY_AUTHORS],
        primary_location={"source": {"display_name": "Nature"}},
        ids={"pmid": "https://pubmed.ncbi.nlm.nih.gov/32939066"},
    )
    assert bibliographic(d) == Bibliographic(authors=NUMPY_AUTHORS, venue="Nature", doi=NUMPY_DOI, url=None)
    assert bibliographic(doc(publication_year=2020)).year == 2020


def test_crossref_record():
    d = doc(
        DOI=NUMPY_DOI,
        author=[{"given": n.rsplit(" ", 1)[0], "family": n.rsplit(" ", 1)[1]} for n in NUMPY_AUTHORS],
        **{"container-title": ["Nature"]},
        pmid="32939066",
    )
    bib = bibliographic(d)
    assert bib.authors == ("Charles R. Harris", "K. Jarrod Millman", "Stéfan J. van der Walt", "Ralf Gommers")
    assert (bib.venue, bib.doi, bib.url) == ("Nature", NUMPY_DOI, "https://pubmed.ncbi.nlm.nih.gov/32939066/")


@pytest.mark.parametrize(
    "value,names",
    [
        ("Harris, Charles R. and Millman, K. Jarrod and van der Walt, Stéfan J.", NUMPY_AUTHORS[:3]),  # BibTeX
        ("Jacob Devlin; Ming-Wei Chang; Kenton Lee; Kristina Toutanova", BERT_AUTHORS),
        ("Jacob Devlin, Ming-Wei Chang, Kenton Lee and Kristina Toutanova", BERT_AUTHORS),
        ("Jacob Devlin, Ming-Wei Chang, Kenton Lee, and Kristina Toutanova", BERT_AUTHORS),
        ("Devlin, J.", ("J. Devlin",)),
        ("Jacob Devlin and others", ("Jacob Devlin",)),
        (["Devlin, Jacob", "Chang, Ming-Wei"], ("Jacob Devlin", "Ming-Wei Chang")),
        ([["Devlin", "Jacob", ""], ["Chang", "Ming-Wei", "Jr."]], ("Jacob Devlin", "Ming-Wei Chang Jr.")),
        ([{"first": "Jacob", "last": "Devlin"}, {"name": "  "}], ("Jacob Devlin",)),
        ("", ()),
        (None, ()),
        (42, ()),
    ],
)
def test_author_names_in_every_shape(value, names):
    assert author_names(value) == names


@pytest.mark.parametrize(
    "value,doi",
    [
        (NUMPY_DOI, NUMPY_DOI),
        (f"https://doi.org/{NUMPY_DOI}", NUMPY_DOI),
        (f"http://dx.doi.org/{NUMPY_DOI}", NUMPY_DOI),
        (f"doi:{NUMPY_DOI}", NUMPY_DOI),
        (f"DOI: {NUMPY_DOI} ", NUMPY_DOI),
        (f"https://www.doi.org/{BERT_DOI}", BERT_DOI),
        ("https://arxiv.org/abs/1810.04805", None),
        ("10.1/x", None),
        ("", None),
        (None, None),
        (123, None),
    ],
)
def test_doi_is_written_bare(value, doi):
    assert normalize_doi(value) == doi


def test_a_doi_link_as_the_url_gives_the_doi():
    d = Doc(doc_id="1", title="t", text="x", url=f"https://doi.org/{NUMPY_DOI}")
    assert bibliographic(d) == Bibliographic(doi=NUMPY_DOI, url=f"https://doi.org/{NUMPY_DOI}")


def test_scifact_records_carry_nothing_and_nothing_is_guessed(scifact):
    assert all(bibliographic(d) == Bibliographic() for d in scifact[:200])


def test_csfcube_records_carry_a_year_in_beir_metadata(data_dir):
    corpus = load_corpus(data_dir / "csfcube")
    d = corpus.get("388")
    assert d.year == 2004 and d.metadata["metadata"]["year"] == "2004"  # the loader reads BEIR's nested year
    assert bibliographic(d) == Bibliographic(year=2004)
    years = {d.doc_id: d.metadata["metadata"]["year"] for d in corpus}
    odd = sorted(y for y in years.values() if not (y.isdigit() and len(y) == 4))
    assert odd == ["801", "None", "None"]  # not a year: left empty, not guessed
    assert all(bibliographic(d).year == (int(years[d.doc_id]) if years[d.doc_id] not in odd else None) for d in corpus)
    assert all(d.year == bibliographic(d).year for d in corpus)


def test_beir_nested_metadata_is_read_and_the_top_level_wins():
    # a BEIR TREC-COVID record nests its link and PubMed id under "metadata"
    d = doc(metadata={"url": "https://www.ncbi.nlm.nih.gov/pmc/articles/PMC35282/", "pubmed_id": "11472636"})
    assert bibliographic(d).url == "https://www.ncbi.nlm.nih.gov/pmc/articles/PMC35282/"
    assert bibliographic(doc(metadata={"pubmed_id": "11472636"})).url == "https://pubmed.ncbi.nlm.nih.gov/11472636/"
    both = doc(venue="Nature", metadata={"venue": "Science", "year": "1999"}, date="2020-09-16")
    assert (bibliographic(both).venue, bibliographic(both).year) == ("Nature", 2020)


def test_scholargym_paper_db_gives_authors_and_link(tmp_path):
    paper = {
        "arxiv_id": "1810.04805",
        "title": "BERT",
        "abstract": "We introduce BERT.",
        "authors": list(BERT_AUTHORS),
        "date": "2018-10-11",
        "categories": ["cs.CL"],
        "url": "https://arxiv.org/abs/1810.04805",
    }
    path = tmp_path / "scholargym_paper_db.json"
    path.write_text(json.dumps({"1810.04805": paper}), encoding="utf-8")
    bib = bibliographic(load_paper_db(path).get("1810.04805"))
    assert bib == Bibliographic(authors=BERT_AUTHORS, year=2018, url="https://arxiv.org/abs/1810.04805")
