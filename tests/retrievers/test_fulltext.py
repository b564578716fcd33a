"""Full-text corpora: PDFs the test writes (text and a table), text and Markdown files, passages and their ids."""

from __future__ import annotations

import itertools
import json

import pytest

from deepresearch import cli
from deepresearch.retrievers.corpus import CorpusError
from deepresearch.retrievers.index import build_index, open_index
from deepresearch.retrievers.open import open_retriever
from deepresearch.retrievers.passages import (
    best_passages,
    clip_sentences,
    passage_docs,
    split_passages,
    split_sentences,
)
from deepresearch.retrievers.pdf import load_fulltext, read_pdf
from deepresearch.retrievers.sources import open_corpus
from deepresearch.retrievers.types import Doc
from tests.pdfgen import make_pdf

FINDINGS = [
    "Vitamin D supplementation lowered the rate of hip fractures in adults over seventy.",
    "The effect was largest in participants with low baseline serum levels.",
    "Calcium alone showed no benefit over placebo in the same cohort.",
    "Adverse events were rare and did not differ between the groups.",
]
TABLE = [["Group", "Fractures", "Rate"], ["Vitamin D", "12", "0.10"], ["Placebo", "25", "0.21"]]
FILLER = "Participants were followed for three years and visited the clinic twice a year."


def trial_pdf(title: str | None = "Vitamin D and fracture risk: a randomised trial") -> bytes:
    page1 = ["Vitamin D and fracture risk", "Abstract", *FINDINGS[:2], *[FILLER] * 6, *TABLE]
    page2 = [*[FILLER] * 8, *FINDINGS[2:], "Sleep quality was not measured in this study."]
    return make_pdf([page1, page2], title=title, author="Ana Lopez; Ben Ode", created="D:20210407093000Z")


@pytest.fixture
def papers(tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "lopez2021.pdf").write_bytes(trial_pdf())
    (folder / "untitled.pdf").write_bytes(trial_pdf(title=None))
    (folder / "sleep.md").write_text(
        "# Sleep and memory\n\nSleep deprivation impairs memory consolidation in "
        "students. Short naps restore part of the loss.\n",
        encoding="utf-8",
    )
    (folder / "notes.txt").write_text("\n\nCoffee and alertness\nCaffeine improves reaction time.\n", encoding="utf-8")
    return folder


def test_pdf_text_table_and_metadata_are_extracted(tmp_path):
    paper = read_pdf(trial_pdf(), "trial.pdf")
    assert paper.title == "Vitamin D and fracture risk: a randomised trial"
    assert paper.authors == ("Ana Lopez", "Ben Ode") and paper.published == "2021-04-07" and paper.pages == 2
    for finding in FINDINGS:
        assert finding in paper.text
    for row in TABLE:  # the table's cells come out in row order, on one line per row
        assert " ".join(row) in " ".join(paper.text.split())
    assert read_pdf(trial_pdf(title=None), "x.pdf").title == "Vitamin D and fracture risk"  # first non-empty line


def test_unreadable_pdf_is_named(tmp_path):
    with pytest.raises(CorpusError, match=r"broken\.pdf: not a readable PDF"):
        read_pdf(b"%PDF-1.4 this is not a PDF", "broken.pdf")
    with pytest.raises(CorpusError, match="no extractable text"):
        read_pdf(make_pdf([[]]), "blank.pdf")


@pytest.mark.parametrize("max_chars,overlap", [(100, 0), (200, 60), (400, 150), (1200, 200)])
def test_passages_are_bounded_overlap_and_cover_the_text(max_chars, overlap):
    distinct = [f"Finding {i} concerns sample {i * 7} of cohort {chr(65 + i % 26)}{i}." for i in range(60)]
    long_word = "-".join(f"w{i}" for i in range(120))  # one "word" of 479 characters, longer than some passages
    text = " ".join(FINDINGS + distinct + [long_word])
    chunks = split_passages(text, max_chars, overlap)
    assert len(chunks) > 1 and all(0 < len(c) <= max_chars for c in chunks)
    for a, b in itertools.pairwise(chunks):
        shared = max((n for n in range(1, min(len(a), len(b)) + 1) if a.endswith(b[:n])), default=0)
        if overlap:
            assert 0 < shared <= overlap  # the next passage starts with the end of this one
        assert b[shared:].strip()  # and always adds text of its own
    joined = " ".join(chunks)
    assert all(f in joined for f in FINDINGS + distinct)
    if not overlap:  # without overlap, the passages put together are the text (the long word cut, not lost)
        assert "".join(joined.split()) == "".join(text.split())
    assert split_passages("One sentence only.", 100, 20) == ["One sentence only."]
    with pytest.raises(ValueError, match="overlap"):
        split_passages(text, 200, 100)


def test_sentences_are_not_cut_when_they_fit():
    text = " ".join(FINDINGS * 3)
    for chunk in split_passages(text, 300, 100):
        assert chunk.endswith(".") and chunk[0].isupper()


@pytest.mark.parametrize("max_chars", [400, 800, 2000])
def test_a_clipped_text_ends_after_a_whole_sentence(scifact, max_chars):
    """What a model reads of a long abstract holds no half sentence for it to quote as a finding (seen with
    the 0.5B model: "Risk of dementia associated with a longer re" cited in a report)."""
    long = [d.text for d in scifact.docs if len(d.text) > max_chars][:300]
    assert len(long) >= 50
    for text in long:
        clipped = clip_sentences(text, max_chars)
        assert len(clipped) <= max_chars and text.startswith(clipped.removesuffix("..."))
        whole, kept = split_sentences(text), split_sentences(clipped)
        if kept != whole[: len(kept)]:  # not even the first sentence fitted: cut at a word, and says so
            assert len(whole[0]) > max_chars and clipped.endswith("...")
    short = next(d.text for d in scifact.docs if len(d.text) < max_chars)
    assert clip_sentences(short, max_chars) == short


def test_a_first_sentence_longer_than_the_limit_is_cut_at_a_word():
    text = "Participants " + "were followed and visited the clinic " * 10 + "twice. A second sentence."
    assert clip_sentences(text, 60) == "Participants were followed and visited the clinic were..."


def test_passage_docs_keep_the_paper():
    paper = Doc("p1", "A title", " ".join(FINDINGS * 4), url="https://x.org/p1", year=2020, metadata={"doi": "10.1/x"})
    docs = passage_docs(paper, 300, 50)
    assert [d.doc_id for d in docs] == [f"p1#{n}" for n in range(1, len(docs) + 1)] and len(docs) > 2
    assert all(
        d.title == "A title"
        and d.url == paper.url
        and d.year == 2020
        and d.metadata["doi"] == "10.1/x"
        and d.metadata["paper_id"] == "p1"
        and d.metadata["passages"] == len(docs)
        for d in docs
    )
    best = best_passages("calcium placebo cohort", docs, 2)
    assert len(best) == 2 and "Calcium alone" in best[0].text


def test_a_folder_is_a_corpus_of_passages(papers):
    corpus, source, skipped = open_corpus(str(papers))
    assert source["kind"] == "fulltext" and skipped == 0
    papers_of = {d.metadata["paper_id"] for d in corpus}
    assert papers_of == {"lopez2021", "untitled", "sleep", "notes"}
    lopez = [d for d in corpus if d.metadata["paper_id"] == "lopez2021"]
    assert len(lopez) >= 2 and all(len(d.text) <= 1200 for d in lopez)
    assert lopez[0].title == "Vitamin D and fracture risk: a randomised trial" and lopez[0].year == 2021
    assert corpus.get("sleep#1").title == "Sleep and memory" and corpus.get("notes#1").title == "Coffee and alertness"
    hits = open_retriever(str(papers)).retriever.search("calcium placebo benefit", 3)
    assert hits[0].doc.metadata["paper_id"] in {"lopez2021", "untitled"} and "Calcium alone" in hits[0].doc.text
    assert "#" in hits[0].doc.doc_id


def test_a_bad_file_is_skipped_with_a_count(papers, caplog):
    (papers / "broken.pdf").write_bytes(b"%PDF-1.4 nothing here")
    docs, skipped = load_fulltext(papers)
    assert skipped == 1 and {d.metadata["paper_id"] for d in docs} == {"lopez2021", "untitled", "sleep", "notes"}
    assert "skipped 1 unreadable files" in caplog.text and "broken.pdf" in caplog.text
    with pytest.raises(CorpusError, match="broken.pdf"):
        load_fulltext(papers, skip_bad=False)


def test_an_index_of_a_pdf_folder_reopens(papers, tmp_path):
    corpus, source, _ = open_corpus(str(papers))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    index = open_index(tmp_path / "idx")
    hit = index.retriever("bm25").search("sleep deprivation memory", 1)[0]
    assert hit.doc.doc_id == "sleep#1" and hit.doc.metadata["paper_id"] == "sleep"


def test_an_index_notices_a_paper_added_to_the_folder(papers, tmp_path):
    from deepresearch.retrievers.index import IndexMismatchError

    corpus, source, _ = open_corpus(str(papers))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    (papers / "new.txt").write_text("Exercise and mood\nRunning lifts mood.\n", encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="changed since index"):
        open_index(tmp_path / "idx")


def test_index_command_on_a_pdf_folder(papers, tmp_path, capsys):
    assert cli.main(["index", str(papers), "--out", str(tmp_path / "idx")]) == 0
    hits = open_retriever(index=tmp_path / "idx").retriever.search("hip fractures vitamin", 2)
    assert all(h.doc.metadata["paper_id"] in {"lopez2021", "untitled"} for h in hits)


def test_offline_run_cites_the_paper_once_and_traces_the_passage(papers, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    (papers / "untitled.pdf").unlink()
    out = tmp_path / "run"
    code = cli.main(
        [
            "run",
            "Does vitamin D lower hip fracture rates compared with calcium or placebo?",
            "--lm",
            "offline",
            "--corpus",
            str(papers),
            "--depth",
            "1",
            "--breadth",
            "2",
            "--taxonomy",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0
    trace = json.loads((out / "trace.json").read_text())
    report = (out / "report.md").read_text()
    refs = trace["references"]
    lopez = [r for r in refs if r["doc_id"] == "lopez2021"]
    assert len(lopez) == 1 and f"[{lopez[0]['number']}]" in report.split("## References")[0]
    assert "Vitamin D and fracture risk: a randomised trial" in report.split("## References")[1]
    assert len({r["doc_id"] for r in refs}) == len(refs)  # one entry per paper
    # the trace names passages: the nodes' hits, the learnings' source ids and the provenance's doc ids
    retrieved = {i for n in trace["tree"] for i in n["retrieved_ids"]}
    assert retrieved and all("#" in i for i in retrieved)
    cited = [s for p in trace["provenance"] for s in p["sources"] if s["doc_id"].startswith("lopez2021#")]
    assert cited and all(s["source_id"].endswith("_" + s["doc_id"].split("#")[1]) for s in cited)
    assert set(lopez[0]["passages"]) <= {sid for x in trace["learnings"] for sid in x["source_ids"]}
    mapped = report.split("## Map of the literature")[1].split("## References")[0]  # each paper listed once
    assert mapped.count("Vitamin D and fracture risk: a randomised trial [") == 1
