"""references.bib: BibTeX that an independent parser reads back with the fields the corpus had."""

import json

import bibtexparser
import pytest
import rispy
from bibtexparser.middlewares import LatexDecodingMiddleware, SeparateCoAuthors

from deepresearch import cli
from deepresearch.programs.artifacts import Reference
from deepresearch.programs.formats.exports import citation_keys, to_bibtex, to_ris
from deepresearch.retrievers.bibliographic import bibliographic
from deepresearch.retrievers.corpus import load_corpus

QUESTION = "Does vitamin D supplementation reduce fracture risk?"

# Three real papers, each in the record shape of a different source (Semantic Scholar, arXiv's metadata,
# Crossref), with their real metadata; the texts are short summaries written for this test.
PAPERS = [
    {
        "_id": "s2-attention",
        "title": "Attention Is All You Need",
        "year": 2017,
        "text": "The Transformer is a network architecture based solely on attention mechanisms. "
        "Transformer models are more parallelizable and need less time to train.",
        "authors": [
            {"authorId": None, "name": n}
            for n in (
                "Ashish Vaswani",
                "Noam Shazeer",
                "Niki Parmar",
                "Jakob Uszkoreit",
                "Llion Jones",
                "Aidan N. Gomez",
                "Łukasz Kaiser",
                "Illia Polosukhin",
            )
        ],
        "venue": "Neural Information Processing Systems",
        "externalIds": {"ArXiv": "1706.03762"},
    },
    {
        "id": "1810.04805",
        "title": "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
        "abstract": "BERT pre-trains deep bidirectional representations from unlabeled text. "
        "BERT models are fine-tuned with one additional output layer for language understanding.",
        "authors": "Jacob Devlin, Ming-Wei Chang, Kenton Lee and Kristina Toutanova",
        "date": "2018-10-11",
        "journal-ref": "Proceedings of NAACL-HLT 2019",
        "doi": "https://doi.org/10.18653/v1/N19-1423",
    },
    {
        "DOI": "10.1038/s41586-020-2649-2",
        "doc_id": "crossref-numpy",
        "title": "Array programming with NumPy",
        "text": "NumPy is the primary array programming library for the Python language. "
        "NumPy arrays underpin scientific software in many research fields.",
        "author": [
            {"given": g, "family": f}
            for g, f in (("Charles R.", "Harris"), ("K. Jarrod", "Millman"), ("Stéfan J.", "van der Walt"))
        ],
        "container-title": ["Nature"],
        "published": "2020-09-16",
    },
]


def parse(text: str):
    """The entries as bibtexparser reads them, LaTeX decoded; fails on any block it could not parse."""
    library = bibtexparser.parse_string(text, append_middleware=[SeparateCoAuthors(), LatexDecodingMiddleware()])
    assert not library.failed_blocks, [b.error for b in library.failed_blocks]
    return library.entries


def fields(entry) -> dict:
    return {f.key: f.value for f in entry.fields}


def run(out, corpus, question, *extra):
    return cli.main(
        [
            "run",
            question,
            "--corpus",
            str(corpus),
            "--lm",
            "offline",
            "--depth",
            "1",
            "--breadth",
            "2",
            "--out",
            str(out),
            "-q",
            *extra,
        ]
    )


def test_bibtex_of_a_scifact_run_holds_what_the_corpus_has(tmp_path, data_dir, scifact, capsys):
    out = tmp_path / "vitd"
    assert run(out, data_dir / "scifact", QUESTION, "--bibtex", "--ris") == 0
    printed = capsys.readouterr().out
    assert f"bibtex: {out / 'references.bib'}" in printed and f"ris:    {out / 'references.ris'}" in printed
    trace = json.loads((out / "trace.json").read_text())
    entries = parse((out / "references.bib").read_text(encoding="utf-8"))
    assert len(entries) == len(trace["references"]) >= 3
    records = rispy.loads((out / "references.ris").read_text(encoding="utf-8"))
    assert [(r["id"], r["title"]) for r in records] == [
        (ref["doc_id"], fields(e)["title"]) for ref, e in zip(trace["references"], entries)
    ]
    assert len({e.key for e in entries}) == len(entries)
    for entry, ref in zip(entries, trace["references"]):
        doc = scifact.get(ref["doc_id"])
        # SciFact records are id, title and abstract: a title and the corpus id, nothing invented
        assert entry.entry_type == "misc" and set(fields(entry)) == {"title", "note"}
        assert fields(entry)["title"] == doc.title.removesuffix(".")
        assert fields(entry)["note"] == f"corpus id {doc.doc_id}; cited as [{ref['number']}] in report.md"


def test_bibtex_of_a_csfcube_run_has_the_years(tmp_path, data_dir):
    out = tmp_path / "cs"
    assert run(out, data_dir / "csfcube", "How can sentiment polarity be classified?", "--bibtex") == 0
    corpus = load_corpus(data_dir / "csfcube")
    trace = json.loads((out / "trace.json").read_text())
    entries = parse((out / "references.bib").read_text(encoding="utf-8"))
    assert len(entries) == len(trace["references"]) >= 3
    report = (out / "report.md").read_text(encoding="utf-8")
    for entry, ref in zip(entries, trace["references"]):
        year = corpus.get(ref["doc_id"]).metadata["metadata"]["year"]
        assert fields(entry)["year"] == year == str(ref["year"])
        assert entry.key.endswith(year) and entry.key[0].isalpha()  # no authors: title word, then year
        assert f"[{ref['number']}] " in report and f"({year}). doc {ref['doc_id']}" in report


def test_bibtex_and_references_carry_authors_venue_doi_and_url(tmp_path):
    corpus = tmp_path / "papers.jsonl"
    corpus.write_text("\n".join(json.dumps(p, ensure_ascii=False) for p in PAPERS) + "\n", encoding="utf-8")
    # every one of the three papers must be cited for the export to be checked against it: the offline
    # assessor keeps only hits close to their search's best, so each paper is asked about on its own
    docs = {d.doc_id: d for d in load_corpus(corpus)}
    references, entries, lines = [], {}, {}
    for name, question in [
        ("attention", "What do Transformer models offer?"),
        ("bert", "What do BERT models offer?"),
        ("numpy", "What do NumPy arrays offer?"),
    ]:
        out = tmp_path / name
        assert run(out, corpus, question, "--bibtex", "--bm25-preset", "scholargym") == 0
        trace = json.loads((out / "trace.json").read_text())
        references += trace["references"]
        report = (out / "report.md").read_text(encoding="utf-8").splitlines()
        lines.update(
            {
                ref["doc_id"]: next(ln for ln in report if ln.startswith(f"[{ref['number']}] "))
                for ref in trace["references"]
            }
        )
        entries.update(
            {
                fields(e)["note"].split(";")[0].removeprefix("corpus id "): e
                for e in parse((out / "references.bib").read_text(encoding="utf-8"))
            }
        )
    assert {r["doc_id"] for r in references} == set(docs)
    for ref in references:
        bib, entry = bibliographic(docs[ref["doc_id"]]), entries[ref["doc_id"]]
        got = fields(entry)
        assert got["author"] == list(bib.authors) and tuple(ref["authors"]) == bib.authors
        assert (got["year"], got.get("doi"), got.get("url")) == (str(bib.year), bib.doi, bib.url)
        assert (ref["year"], ref["doi"], ref["url"], ref["venue"]) == (bib.year, bib.doi, bib.url, bib.venue)
        assert got.get("journal", got.get("booktitle")) == bib.venue
    assert entries["s2-attention"].key == "vaswani2017attention" and entries["s2-attention"].entry_type == "article"
    assert fields(entries["s2-attention"])["url"] == "https://arxiv.org/abs/1706.03762"
    assert entries["1810.04805"].entry_type == "inproceedings"
    assert fields(entries["1810.04805"])["doi"] == "10.18653/v1/N19-1423"
    assert entries["crossref-numpy"].key == "harris2020array" and entries["crossref-numpy"].entry_type == "article"
    assert fields(entries["crossref-numpy"])["author"][2] == "Stéfan J. van der Walt"
    assert lines["s2-attention"].endswith(
        "Ashish Vaswani, Noam Shazeer, Niki Parmar, et al. (2017). Attention Is All "
        "You Need. Neural Information Processing Systems. "
        "https://arxiv.org/abs/1706.03762"
    )
    assert lines["crossref-numpy"].endswith(
        "Charles R. Harris, K. Jarrod Millman, Stéfan J. van der Walt (2020). "
        "Array programming with NumPy. Nature. "
        "https://doi.org/10.1038/s41586-020-2649-2"
    )


def test_a_rerun_without_bibtex_removes_the_stale_file(tmp_path, data_dir):
    out = tmp_path / "vitd"
    assert run(out, data_dir / "scifact", QUESTION, "--bibtex") == 0 and (out / "references.bib").exists()
    assert run(out, data_dir / "scifact", QUESTION) == 0
    assert not (out / "references.bib").exists()
    assert run(out, data_dir / "scifact", QUESTION, "--bibtex") == 0
    assert run(out, data_dir / "scifact", "Is vitamin D deficiency linked to depression?", "--overwrite") == 0
    assert not (out / "references.bib").exists()


def ref(number, title, **kw):
    return Reference(number=number, source_id=f"{number:08x}_1", doc_id=str(number), title=title, **kw)


def test_latex_specials_are_escaped_and_read_back():
    title = "R&D on 50% of {x} at $5 for #1 in snake_case: Müller's study"
    [entry] = parse(
        to_bibtex(
            [
                ref(
                    1,
                    title,
                    venue="Science & Society",
                    authors=("Centers for Disease Control and Prevention", "José Núñez"),
                )
            ]
        )
    )
    got = fields(entry)
    assert got["title"] == title and got["journal"] == "Science & Society"
    assert got["author"] == ["{Centers for Disease Control and Prevention}", "José Núñez"]  # one name, braced


def test_doi_and_url_are_verbatim_and_braces_cannot_break_the_entry():
    text = to_bibtex(
        [
            ref(
                1,
                "T",
                doi="10.1002/(SICI)1097-4636(199601)30:1<1::AID-JBM1>3.0.CO;2-Z",
                url="https://example.org/a_b?q={x}",
            )
        ]
    )
    [entry] = bibtexparser.parse_string(text).entries  # raw: no LaTeX decoding of verbatim fields
    assert fields(entry)["doi"] == "10.1002/(SICI)1097-4636(199601)30:1<1::AID-JBM1>3.0.CO;2-Z"
    assert fields(entry)["url"] == "https://example.org/a_b?q=%7Bx%7D"


def test_keys_are_stable_unique_and_ascii():
    refs = [
        ref(1, "The vitamin D trial", year=2020, authors=("José Núñez",)),
        ref(2, "Vitamin D trial, again", year=2020, authors=("Ana Núñez",)),
        ref(3, "A Vitamin", year=2020, authors=("Bo Nunez",)),
        ref(4, "2019 and beyond", year=2021),
        ref(5, ""),
        ref(6, "Über 3D", authors=("Ö",)),
    ]
    keys = citation_keys(refs)
    assert keys == ["nunez2020vitamin", "nunez2020vitaminb", "nunez2020vitaminc", "beyond2021", "doc5", "ouber"]
    assert citation_keys(refs) == keys
    assert [e.key for e in parse(to_bibtex(refs))] == keys


def test_entry_types_follow_the_venue():
    entries = parse(
        to_bibtex(
            [
                ref(1, "A", venue="Nature"),
                ref(2, "B", venue="Proceedings of ACL 2020"),
                ref(3, "C", venue="Workshop on Scholarly Document Processing"),
                ref(4, "D"),
            ]
        )
    )
    assert [e.entry_type for e in entries] == ["article", "inproceedings", "inproceedings", "misc"]
    assert "booktitle" in fields(entries[1]) and "journal" in fields(entries[0])


def test_no_references_is_a_valid_empty_file():
    text = to_bibtex([])
    assert parse(text) == [] and text.startswith("%")


@pytest.mark.parametrize(
    "reference,line",
    [
        (ref(1, "Title.", year=2004), "[1] Title (2004). doc 1"),
        (
            ref(2, "T", authors=("A", "B", "C", "D"), year=2020, venue="Nature.", doi="10.1038/x"),
            "[2] A, B, C, et al. (2020). T. Nature. https://doi.org/10.1038/x",
        ),
        (
            ref(3, "T", authors=("A", "B"), url="https://arxiv.org/abs/1706.03762"),
            "[3] A, B. T. https://arxiv.org/abs/1706.03762",
        ),
        (
            ref(4, "", url="https://handsoffcain.info/Documento.php?id=16300509"),
            "[4] Documento.Php?Id=16300509. https://handsoffcain.info/Documento.php?id=16300509",
        ),  # no title: the title-cased last segment of the URL's path
    ],
)
def test_reference_lines(reference, line):
    assert reference.render() == line


def test_references_of_older_traces_still_load():
    old = {"number": 1, "source_id": "aaaaaaaa_1", "doc_id": "7", "title": "T", "year": None, "url": None}
    assert Reference.from_dict(old) == Reference(1, "aaaaaaaa_1", "7", "T")
    assert Reference.from_dict({**old, "authors": ["A", "B"]}).authors == ("A", "B")


def test_ris_is_read_back_by_an_independent_parser_with_what_the_corpus_has(tmp_path):
    corpus = tmp_path / "papers.jsonl"
    corpus.write_text("\n".join(json.dumps(p, ensure_ascii=False) for p in PAPERS) + "\n", encoding="utf-8")
    docs = list(load_corpus(corpus))
    refs = []
    for number, doc in enumerate(docs, start=1):
        bib = bibliographic(doc)
        refs.append(
            Reference(number, f"s{number}", doc.doc_id, doc.title, bib.year, bib.url, bib.authors, bib.venue, bib.doi)
        )
    refs.append(Reference(4, "s4", "bare", "A <i>bare</i> record\x07 with\nno metadata."))
    records = rispy.loads(to_ris(refs))
    assert len(records) == 4
    for ref, record in zip(refs, records):
        assert record["title"] == ref.title.removesuffix(".") or ref is refs[-1]
        assert record.get("authors", []) == list(ref.authors) and record["id"] == ref.doc_id
        assert record.get("year") == (str(ref.year) if ref.year else None)
        assert (record.get("doi"), record.get("urls", [None])[0]) == (ref.doi, ref.url)
        assert record.get("secondary_title") == ref.venue and record["notes"] == [
            f"cited as [{ref.number}] in report.md"
        ]
    assert [r["type_of_reference"] for r in records] == ["JOUR", "CONF", "JOUR", "GEN"]
    assert records[0]["authors"][6] == "Łukasz Kaiser" and records[1]["doi"] == "10.18653/v1/N19-1423"
    assert records[-1]["title"] == "A bare record with no metadata"  # markup, control bytes and line breaks gone
    assert to_ris([]) == ""
