"""Full text (issue 16): how fast PDFs become passages, and whether passage-level search finds papers better.

    python -m benchmarks fulltext     or     python benchmarks/bench_fulltext.py [--papers 40] [--pages 8]

1. Speed. `--papers` PDFs of `--pages` pages each are written (tests/pdfgen.py, Helvetica text) from
   SciFact abstracts, with the same text beside them as `.txt` files. Measured in this run: extraction with
   pypdf (pages and characters per second), splitting into passages (passages per second), and the whole
   `load_fulltext` of the PDF folder against the same of the text folder (the reference: reading text
   needs no PDF parsing), so the ratio is the cost of PDF extraction on this machine.
2. Quality. SciFact (5,183 abstracts, 300 test queries, BEIR qrels) is searched two ways with the default
   BM25 (English analyzer, Lucene IDF, k1 1.2): each abstract whole (the reference), and each abstract
   split into passages (`split_passages`), the top 1,000 passages aggregated to documents by their best
   passage's score (MaxP). nDCG@10 and Recall@10/100 for several passage lengths. SciFact is the corpus
   here with judgements; its abstracts are short (about 1,500 characters), so this shows what splitting
   costs or gains on abstracts, not on whole papers, for which no judged corpus ships with the data.
Measured on the 2-core development machine under a load average of 7 to 8 (other work running): pypdf
extracts 68 pages/s (0.34 M characters/s), splitting makes 5,339 passages/s, and a folder of 40 eight-page
PDFs loads as 1,738 passages in 6.3 s, 13.8x the time of its text twins. SciFact nDCG@10: abstracts
0.6828 (Recall@10 0.8168), passages 400/80 0.6776 (0.7864), 800/150 0.6886 (0.8138), 1200/200 0.6842
(0.8163): on abstracts, passage search with MaxP is as good as whole-document search (within 1%).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table
from deepresearch.eval.retrieval import evaluate_run
from deepresearch.retrievers.beir import load_qrels, load_queries
from deepresearch.retrievers.bm25 import BM25Retriever
from deepresearch.retrievers.corpus import Corpus, load_corpus
from deepresearch.retrievers.open import bm25_settings
from deepresearch.retrievers.passages import passage_docs, split_passages
from deepresearch.retrievers.pdf import load_fulltext, read_pdf
from tests.pdfgen import make_pdf

LINE_CHARS = 95  # characters per line of a generated page (Helvetica 10 pt fits about this many)
PAGE_LINES = 60  # lines per page
PASSAGE_SETTINGS = [(400, 80), (800, 150), (1200, 200)]


def machine() -> str:
    one, five, fifteen = os.getloadavg()
    return f"machine: {os.cpu_count()} cores, load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def wrap(text: str, width: int = LINE_CHARS) -> list[str]:
    lines, cur = [], ""
    for word in text.split():
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return lines + ([cur] if cur else [])


def write_papers(corpus: Corpus, folder: Path, papers: int, pages: int) -> tuple[int, int]:
    """PDFs and `.txt` twins of `papers` papers made of consecutive abstracts; returns (pages, characters)."""
    pdfs, txts = folder / "pdf", folder / "txt"
    pdfs.mkdir()
    txts.mkdir()
    docs = iter(corpus)
    total_pages = total_chars = 0
    for p in range(papers):
        lines: list[str] = []
        while len(lines) < pages * PAGE_LINES:
            d = next(docs)
            lines += [d.title, *wrap(d.text), ""]
        lines = lines[: pages * PAGE_LINES]
        title = lines[0]
        (pdfs / f"paper{p:03d}.pdf").write_bytes(
            make_pdf(
                [lines[i : i + PAGE_LINES] for i in range(0, len(lines), PAGE_LINES)], title=title, created="D:20200101"
            )
        )
        (txts / f"paper{p:03d}.txt").write_text("\n".join(lines), encoding="utf-8")
        total_pages += pages
        total_chars += sum(len(x) for x in lines)
    return total_pages, total_chars


def speed(corpus: Corpus, papers: int, pages: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        n_pages, n_chars = write_papers(corpus, folder, papers, pages)
        files = sorted((folder / "pdf").glob("*.pdf"))
        read_pdf(files[0])  # warm-up: the first read imports pypdf
        started = time.perf_counter()
        texts = [read_pdf(f).text for f in files]
        extract_s = time.perf_counter() - started
        started = time.perf_counter()
        n_passages = sum(len(split_passages(t)) for t in texts)
        split_s = time.perf_counter() - started
        started = time.perf_counter()
        pdf_docs, _ = load_fulltext(folder / "pdf")
        pdf_s = time.perf_counter() - started
        started = time.perf_counter()
        txt_docs, _ = load_fulltext(folder / "txt")
        txt_s = time.perf_counter() - started
    rows = [
        {
            "step": "extract (pypdf)",
            "seconds": extract_s,
            "pages_s": n_pages / extract_s,
            "passages_s": None,
            "mchars_s": n_chars / extract_s / 1e6,
        },
        {
            "step": "split passages",
            "seconds": split_s,
            "pages_s": None,
            "passages_s": n_passages / split_s,
            "mchars_s": n_chars / split_s / 1e6,
        },
        {
            "step": "PDF folder",
            "seconds": pdf_s,
            "pages_s": n_pages / pdf_s,
            "passages_s": len(pdf_docs) / pdf_s,
            "mchars_s": n_chars / pdf_s / 1e6,
        },
        {
            "step": "text folder (ref)",
            "seconds": txt_s,
            "pages_s": n_pages / txt_s,
            "passages_s": len(txt_docs) / txt_s,
            "mchars_s": n_chars / txt_s / 1e6,
        },
    ]
    cols = [
        ("step", "step", ""),
        ("seconds", "seconds", ".3f"),
        ("pages_s", "pages/s", ",.0f"),
        ("passages_s", "passages/s", ",.0f"),
        ("mchars_s", "Mchars/s", ".2f"),
    ]
    return (
        f"== speed: {papers} PDFs x {pages} pages ({n_pages} pages, {n_chars / 1e6:.1f} M characters), "
        f"{n_passages} passages of at most 1,200 characters (200 overlap)\n{table(rows, cols)}\n"
        f"PDF folder / text folder: {pdf_s / txt_s:.1f}x the time (PDF extraction is "
        f"{extract_s / pdf_s:.0%} of reading the PDF folder); {len(pdf_docs)} passages from PDFs, "
        f"{len(txt_docs)} from the text twins"
    )


def maxp_run(bm25: BM25Retriever, queries: dict[str, str], depth: int = 1000) -> dict[str, list[str]]:
    """Query id -> document ids ranked by their best passage's score (passage ids `doc#n`)."""
    run = {}
    for qid, text in queries.items():
        best: dict[str, float] = {}
        for h in bm25.search(text, depth):
            doc = str(h.doc.metadata.get("paper_id") or h.doc.doc_id)
            best.setdefault(doc, h.score)  # hits come best first: the first of a document is its best
        run[qid] = list(best)[:100]
    return run


def quality(corpus: Corpus, data: Path) -> str:
    queries = load_queries(data / "scifact")
    qrels = load_qrels(data / "scifact", "test")
    queries = {q: queries[q] for q in qrels}
    settings = bm25_settings("default")
    ks = {"ndcg": 10, "recall": 100, "mrr": 10}
    rows = []
    started = time.perf_counter()
    bm25 = BM25Retriever(corpus, **settings)
    run = {q: [h.doc.doc_id for h in bm25.search(t, 100)] for q, t in queries.items()}
    rows.append(
        {
            "index": "abstracts (ref)",
            "units": len(corpus),
            **evaluate_run(run, qrels, ks),
            "recall@10": evaluate_run(run, qrels, {"recall": 10})["recall@10"],
            "seconds": time.perf_counter() - started,
        }
    )
    reference = rows[0]
    for max_chars, overlap in PASSAGE_SETTINGS:
        started = time.perf_counter()
        passages = Corpus([p for d in corpus for p in passage_docs(d, max_chars, overlap)], name="passages")
        bm25 = BM25Retriever(passages, **settings)
        run = maxp_run(bm25, queries)
        rows.append(
            {
                "index": f"passages {max_chars}/{overlap}",
                "units": len(passages),
                **evaluate_run(run, qrels, ks),
                "recall@10": evaluate_run(run, qrels, {"recall": 10})["recall@10"],
                "seconds": time.perf_counter() - started,
            }
        )
    for r in rows:
        r["ratio"] = r["ndcg@10"] / reference["ndcg@10"]
    cols = [
        ("index", "index", ""),
        ("units", "units", ",d"),
        ("ndcg@10", "nDCG@10", ".4f"),
        ("ratio", "vs ref", ".3f"),
        ("recall@10", "Recall@10", ".4f"),
        ("recall@100", "Recall@100", ".4f"),
        ("mrr@10", "MRR@10", ".4f"),
        ("seconds", "seconds", ".1f"),
    ]
    return (
        f"== quality: SciFact, {len(queries)} test queries; passages aggregated to documents by max score "
        f"(top 1,000 passages), BM25 default preset\n{table(rows, cols)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=os.environ.get("DEEPRESEARCH_DATA"),
        help="the shared data folder holding scifact/ (default $DEEPRESEARCH_DATA)",
    )
    parser.add_argument("--papers", type=int, default=40, help="PDFs to write for the speed test")
    parser.add_argument("--pages", type=int, default=8, help="pages per PDF")
    parser.add_argument("--skip-quality", action="store_true")
    args, _ = parser.parse_known_args()  # `python -m benchmarks fulltext` passes the suite name through
    if not args.data:
        parser.error("pass --data or set DEEPRESEARCH_DATA to the shared data folder")
    corpus = load_corpus(Path(args.data) / "scifact")
    print(machine())
    print(speed(corpus, args.papers, args.pages))
    if not args.skip_quality:
        print()
        print(quality(corpus, Path(args.data)))
    print(machine())


if __name__ == "__main__":
    main()
