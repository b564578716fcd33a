"""`--full-text`: open-access PDFs of hits fetched from a local HTTP server, cached, read as passages."""

from __future__ import annotations

import json
import logging

import pytest

from deepresearch import cli
from deepresearch.retrievers.bm25 import BM25Retriever
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.fulltext import FullTextCache, FullTextError, FullTextRetriever
from deepresearch.retrievers.types import Doc
from tests.page_server import PageServer
from tests.retrievers.test_fulltext import FINDINGS, trial_pdf


@pytest.fixture
def server():
    """A generated PDF, an HTML page posing as a PDF, a large PDF, and 404 elsewhere."""
    s = PageServer(
        {
            "/lopez.pdf": (200, "application/pdf", trial_pdf()),
            "/landing.pdf": (200, "text/html", b"<html>Sign in to read</html>"),
            "/big.pdf": (200, "application/pdf", trial_pdf() + b"%" * 200_000),
        }
    )
    yield s
    s.close()


def records(url: str) -> list[dict]:
    return [
        {
            "_id": "lopez2021",
            "title": "Vitamin D and fracture risk",
            "text": "An abstract about vitamin D and bones.",
            "year": 2021,
            "doi": "10.1234/bone.7",
            "pdf_url": f"{url}/lopez.pdf",
        },
        {
            "_id": "gone",
            "title": "Vitamin D and falls",
            "text": "Vitamin D abstract whose PDF link is broken.",
            "pdf_url": f"{url}/missing.pdf",
        },
        {"_id": "closed", "title": "Vitamin D in winter", "text": "Vitamin D abstract with no open PDF."},
    ] + [
        {"_id": f"other{i}", "title": f"Unrelated topic {i}", "text": t}
        for i, t in enumerate(
            [
                "Graph neural networks for molecules.",
                "Soil erosion in river deltas.",
                "Sparse attention in transformers.",
                "Coral reef bleaching events.",
                "Auction design for spectrum.",
            ]
        )
    ]


def corpus(url: str) -> Corpus:
    return Corpus(
        [
            Doc(
                r["_id"],
                r["title"],
                r["text"],
                year=r.get("year"),
                metadata={k: v for k, v in r.items() if k in ("pdf_url", "doi")},
            )
            for r in records(url)
        ]
    )


def test_a_pdf_is_fetched_once_then_read_from_the_cache(server, tmp_path):
    cache = FullTextCache(tmp_path / "ft")
    first = cache.fetch(f"{server.url}/lopez.pdf")
    again = FullTextCache(tmp_path / "ft").fetch(f"{server.url}/lopez.pdf")
    assert first == again == trial_pdf() and server.requests["/lopez.pdf"] == 1
    assert f"{server.url}/lopez.pdf" in cache


@pytest.mark.parametrize(
    "path,message", [("/missing.pdf", "HTTP 404"), ("/landing.pdf", "not a PDF"), ("/big.pdf", "larger than")]
)
def test_a_bad_link_raises_one_named_error(server, tmp_path, path, message):
    cache = FullTextCache(tmp_path / "ft", max_bytes=100_000)
    with pytest.raises(FullTextError, match=message) as err:
        cache.fetch(server.url + path)
    assert server.url + path in str(err.value) and "\n" not in str(err.value)
    assert server.url + path not in cache  # nothing of a failed download is kept


def test_unreachable_host_is_an_error_naming_the_link(tmp_path):
    with pytest.raises(FullTextError, match="127.0.0.1:9"):
        FullTextCache(tmp_path, timeout_s=2).fetch("http://127.0.0.1:9/x.pdf")


def test_hits_with_a_pdf_become_their_best_passages(server, tmp_path, caplog):
    retriever = FullTextRetriever(
        BM25Retriever(corpus(server.url)),
        FullTextCache(tmp_path / "ft"),
        passages_per_paper=2,
        max_chars=300,
        overlap=50,
    )
    with caplog.at_level(logging.WARNING):
        hits = retriever.search("vitamin D calcium placebo", 3)
        again = retriever.search("vitamin D calcium placebo", 3)
    ids = [h.doc.doc_id for h in hits]
    lopez = [h for h in hits if h.doc.doc_id.startswith("lopez2021#")]
    assert len(lopez) == 2 and "gone" in ids and "closed" in ids  # the failed and the closed paper keep abstracts
    assert "Calcium alone showed no benefit over placebo" in lopez[0].doc.text  # ranked against the query
    assert all(
        h.doc.title == "Vitamin D and fracture risk"
        and h.doc.metadata["paper_id"] == "lopez2021"
        and h.doc.metadata["doi"] == "10.1234/bone.7"
        for h in lopez
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "full text of gone not read" in warnings[0] and "HTTP 404" in warnings[0]
    assert [h.doc.doc_id for h in again] == ids and server.requests == {"/lopez.pdf": 1, "/missing.pdf": 1}
    # a passage seen before excludes its paper from the next page
    assert all(
        not h.doc.doc_id.startswith("lopez2021")
        for h in retriever.search("vitamin D calcium placebo", 3, exclude=[lopez[0].doc.doc_id])
    )


def test_read_keeps_the_paper_id_and_gives_its_best_passages(server, tmp_path):
    retriever = FullTextRetriever(
        BM25Retriever(corpus(server.url)),
        FullTextCache(tmp_path / "ft"),
        passages_per_paper=2,
        max_chars=300,
        overlap=50,
    )
    hits = {h.doc.doc_id: h for h in retriever.inner.search("vitamin D", 3)}
    read = retriever.read(hits["lopez2021"], "calcium placebo")
    assert read.doc.doc_id == "lopez2021" and read.doc.metadata["full_text"] is True
    assert "Calcium alone showed no benefit" in read.doc.text and len(read.doc.text) <= 2 * 300 + 2
    assert retriever.read(hits["closed"], "calcium") is hits["closed"]


def test_run_with_full_text_reads_passages_of_the_pdf(server, tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    path = tmp_path / "hits.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records(server.url)) + "\n")
    out = tmp_path / "run"
    code = cli.main(
        [
            "run",
            "Does vitamin D lower hip fracture rates compared with calcium or placebo?",
            "--lm",
            "offline",
            "--corpus",
            str(path),
            "--full-text",
            "--full-text-cache",
            str(tmp_path / "ft"),
            "--depth",
            "1",
            "--breadth",
            "1",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0
    trace = json.loads((out / "trace.json").read_text())
    retrieved = [i for n in trace["tree"] for i in n["retrieved_ids"]]
    assert any(i.startswith("lopez2021#") for i in retrieved) and "gone" in retrieved
    assert trace["config"]["full_text"] is True
    refs = [r for r in trace["references"] if r["doc_id"] == "lopez2021"]
    assert len(refs) == 1 and refs[0]["passages"]
    body = (out / "report.md").read_text().split("## References")[0]
    assert any(f.rstrip(".") in body for f in FINDINGS)  # the report quotes the PDF, which the abstract does not hold
    assert [r.getMessage()[:26] for r in caplog.records if "full text" in r.getMessage()] == [
        "full text of gone not read"
    ]


def test_the_pdf_cache_is_bounded_and_drops_the_oldest_first(tmp_path):
    big = trial_pdf() + b"%" * 200_000
    s = PageServer({"/a.pdf": (200, "application/pdf", big), "/b.pdf": (200, "application/pdf", big)})
    try:
        cache = FullTextCache(tmp_path / "ft", size_limit=300_000)  # room for one 200 kB PDF, not two
        cache.fetch(f"{s.url}/a.pdf")
        assert f"{s.url}/a.pdf" in cache
        cache.fetch(f"{s.url}/b.pdf")
        assert f"{s.url}/b.pdf" in cache and f"{s.url}/a.pdf" not in cache
    finally:
        s.close()
