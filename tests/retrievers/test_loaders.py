import json

import pytest

from deepresearch.retrievers import CorpusError, load_corpus
from deepresearch.retrievers.hf import load_hf_corpus
from deepresearch.retrievers.scholargym import iter_json_object, load_paper_db
from deepresearch.retrievers.sources import open_corpus

PAPERS = {
    "2401.00001": {
        "arxiv_id": "2401.00001",
        "title": "Sparse attention",
        "abstract": "We study sparse attention.",
        "authors": ["A. One"],
        "date": "2024-01-15",
        "categories": ["cs.CL", "cs.LG"],
        "url": "https://arxiv.org/abs/2401.00001",
    },
    "2409.99999": {
        "arxiv_id": "2409.99999",
        "title": 'Dense "retrieval" {braces}',
        "abstract": "Dual encoders, ünïcode.",
        "authors": [],
        "date": "2024-10-01",
        "categories": ["cs.IR"],
    },
}


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_invalid_json_line_names_file_and_line(tmp_path):
    path = write_lines(
        tmp_path / "c.jsonl", ['{"_id": "1", "text": "ok"}', '{"_id": "2", "text": ', '{"_id": "3", "text": "ok"}']
    )
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: line is not valid JSON"):
        load_corpus(path)


def test_missing_id_or_text_names_the_line(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"_id": "1", "text": "ok"}', '{"title": "no id", "text": "x"}'])
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: record has no id"):
        load_corpus(path)
    path = write_lines(tmp_path / "d.jsonl", ['{"_id": "1", "title": "no text"}'])
    with pytest.raises(CorpusError, match=r"d\.jsonl:1: record '1' has no text"):
        load_corpus(path)


def test_skip_bad_counts_skipped_lines(tmp_path):
    path = write_lines(
        tmp_path / "c.jsonl",
        ['{"_id": "1", "text": "ok"}', "not json", '{"title": "no id"}', '{"_id": "4", "text": "ok"}'],
    )
    corpus, _, skipped = open_corpus(str(path), skip_bad=True)
    assert [d.doc_id for d in corpus] == ["1", "4"] and skipped == 2


def test_empty_corpus_is_one_clear_error(tmp_path):
    path = write_lines(tmp_path / "empty.jsonl", [""])
    with pytest.raises(CorpusError, match="has no documents"):
        load_corpus(path)


def test_beir_folder(scifact):
    assert (
        len(scifact) == 5183 and scifact[0].doc_id == "4983" and scifact.get("4983").title.startswith("Microstructural")
    )


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_paper_db_streams_a_json_object(tmp_path, chunk):
    path = tmp_path / "scholargym_paper_db.json"
    path.write_text(json.dumps(PAPERS, ensure_ascii=False, indent=1), encoding="utf-8")
    pairs = list(iter_json_object(path, chunk_size=chunk))
    assert [k for k, _ in pairs] == list(PAPERS) and pairs[1][1] == PAPERS["2409.99999"]
    corpus = load_paper_db(path)
    doc = corpus.get("2401.00001")
    assert (doc.title, doc.text, doc.published, doc.year) == (
        "Sparse attention",
        "We study sparse attention.",
        "2024-01-15",
        2024,
    )
    assert doc.metadata["categories"] == ["cs.CL", "cs.LG"] and doc.metadata["authors"] == ["A. One"]


def test_paper_db_feeds_the_filters(tmp_path):
    from deepresearch.retrievers import BM25Retriever

    path = tmp_path / "db.json"
    path.write_text(json.dumps(PAPERS), encoding="utf-8")
    bm25 = BM25Retriever(load_paper_db(path), tokenizer="scholargym")
    assert bm25.filters.mask(before="2024-09").tolist() == [True, False]
    assert bm25.filters.mask(categories=["cs.IR"]).tolist() == [False, True]


def test_truncated_paper_db_is_reported(tmp_path):
    path = tmp_path / "db.json"
    path.write_text(json.dumps(PAPERS)[:-40], encoding="utf-8")
    with pytest.raises(CorpusError, match="check the file is complete"):
        load_paper_db(path)


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    import datasets

    folder = tmp_path_factory.mktemp("hf") / "papers"
    rows = [{"pid": k, "name": v["title"], "summary": v["abstract"], "date": v["date"]} for k, v in PAPERS.items()]
    datasets.Dataset.from_list(rows).save_to_disk(str(folder))
    return folder


def test_hf_dataset_with_field_mapping(hf_folder):
    corpus = load_hf_corpus(str(hf_folder), fields={"doc_id": "pid", "title": "name", "text": "summary"})
    assert [d.doc_id for d in corpus] == list(PAPERS)
    assert corpus[0].title == "Sparse attention" and corpus[0].published == "2024-01-15"


def test_hf_data_file_with_default_names(tmp_path):
    path = write_lines(tmp_path / "rows.jsonl", [json.dumps({"_id": "a", "title": "T", "text": "body"})])
    corpus, source, _ = open_corpus(f"hf:{path}")
    assert corpus[0].doc_id == "a" and source["kind"] == "hf"


def test_unknown_field_mapping_is_one_clear_error(hf_folder):
    with pytest.raises(CorpusError, match="unknown field 'abstract'"):
        load_hf_corpus(str(hf_folder), fields={"abstract": "summary"})
    with pytest.raises(CorpusError, match="no column 'nope'"):
        load_hf_corpus(str(hf_folder), fields={"doc_id": "nope"})
