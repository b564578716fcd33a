import json
import mmap
import os

import numpy as np
import pytest

from deepresearch import cli
from deepresearch.retrievers import BM25_PRESETS, BM25Retriever, Corpus, Doc, StoredCorpus
from deepresearch.retrievers.index import FORMAT, IndexMismatchError, build_index, open_index
from deepresearch.retrievers.sources import open_corpus
from deepresearch.retrievers.store import StringTable


def is_mapped(array) -> bool:
    """True for a view of a file mapped in memory (not a copy read into it)."""
    while array is not None:
        if isinstance(array, np.memmap | mmap.mmap):
            return True
        array = getattr(array, "base", None)
    return False


@pytest.fixture()
def corpus_file(tmp_path, data_dir):
    path = tmp_path / "corpus.jsonl"
    with (data_dir / "scifact" / "corpus.jsonl").open(encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(60)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def scifact_index(tmp_path_factory, data_dir):
    corpus, source, _ = open_corpus(str(data_dir / "scifact"))
    folder = tmp_path_factory.mktemp("index") / "scifact"
    build_index(corpus, folder, source, bm25=BM25_PRESETS["default"])
    return folder


def test_built_index_serves_the_same_results(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    built = build_index(
        corpus, tmp_path / "idx", source, bm25={"tokenizer": "scholargym"}, dense_model="all-MiniLM-L6-v2"
    )
    opened = open_index(tmp_path / "idx")
    for kind in ("bm25", "dense", "hybrid"):
        assert opened.retriever(kind).search("cell signalling", 10) == built.retriever(kind).search(
            "cell signalling", 10
        )


def test_an_index_ranks_every_query_as_the_in_memory_index_does(scifact_index, scifact, scifact_queries):
    opened = open_index(scifact_index)
    in_memory = BM25Retriever(scifact, **BM25_PRESETS["default"])
    for query in scifact_queries.values():  # all 1,109: ids, scores (bit for bit) and ranks
        assert opened.bm25.search(query, 10) == in_memory.search(query, 10)
    query = "vitamin D deficiency and bone fractures"
    leaders = {h.doc.doc_id for h in in_memory.search(query, 3)}
    assert opened.bm25.search(query, 10, offset=5, exclude=leaders) == in_memory.search(
        query, 10, offset=5, exclude=leaders
    )


def test_an_index_opens_memory_mapped_and_reads_documents_on_demand(scifact_index, scifact):
    opened = open_index(scifact_index)
    assert isinstance(opened.corpus, StoredCorpus)
    for array in (
        opened.bm25.codes,
        opened.bm25.indices,
        opened.bm25.indptr,
        opened.bm25.levels,
        opened.bm25.idf,
        opened.bm25.doc_len,
        opened.bm25.max_weight,
        opened.bm25.dense_weights,
    ):
        assert is_mapped(array)
    assert isinstance(opened.bm25.vocab, StringTable) and opened.bm25.vocab.get("vitamin") is not None
    stored = opened.corpus
    assert len(stored) == len(scifact) and stored.fingerprint() == scifact.fingerprint()
    assert stored[0] == scifact[0] and stored[-1] == scifact[-1] and stored[10:13] == list(scifact)[10:13]
    assert stored.get("4983") == scifact.get("4983") and "4983" in stored and "no-such-id" not in stored
    assert stored.index_of(scifact[4000].doc_id) == 4000 and stored.get("no-such-id") is None
    assert list(stored) == list(scifact)


def test_documents_keep_their_fields_and_filters_work_on_the_stored_corpus(tmp_path):
    docs = [
        Doc(
            doc_id="a",
            title="graph networks",
            text="graph neural networks",
            published="2024-09-30",
            year=2024,
            url="https://x/a",
            metadata={"categories": ["cs.LG"], "authors": ["Ä. Ü"]},
        ),
        Doc(doc_id="b", title="graph search", text="graph search heuristics", published="2024-10-01"),
        Doc(doc_id="ü-3", title="graphs", text="graph theory", metadata={"categories": "cs.DM cs.LG"}),
    ]
    build_index(Corpus(docs, name="tiny"), tmp_path / "tiny", bm25=BM25_PRESETS["default"])
    opened = open_index(tmp_path / "tiny")
    assert [(d, dict(d.metadata)) for d in opened.corpus] == [(d, dict(d.metadata)) for d in docs]
    stored, in_memory = opened.bm25, BM25Retriever(Corpus(docs), **BM25_PRESETS["default"])
    for filters, expected in [
        ({"before": "2024-09"}, {"a", "ü-3"}),
        ({"categories": ["cs.LG"], "exclude": {"a"}}, {"ü-3"}),
    ]:
        hits = stored.search("graph", 10, **filters)
        assert {h.doc.doc_id for h in hits} == expected and hits == in_memory.search("graph", 10, **filters)


def test_changed_corpus_is_refused_unless_only_its_time_changed(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    stat = corpus_file.stat()
    os.utime(corpus_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched, not changed
    with pytest.raises(IndexMismatchError, match="changed since index .* was built .*--verify-index"):
        open_index(tmp_path / "idx")
    assert len(open_index(tmp_path / "idx", verify=True).corpus) == 60  # the contents are compared: the same
    lines = corpus_file.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[3])
    record["text"] += " edited"
    lines[3] = json.dumps(record) + "\n"
    corpus_file.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="changed since index"):
        open_index(tmp_path / "idx")
    with pytest.raises(IndexMismatchError, match="now has fingerprint .* rebuild it with `deepresearch index"):
        open_index(tmp_path / "idx", verify=True)


def test_an_index_whose_corpus_file_is_gone_serves_its_own_copy(tmp_path, corpus_file, caplog):
    corpus, source, _ = open_corpus(str(corpus_file))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    corpus_file.unlink()
    opened = open_index(tmp_path / "idx")
    assert "is gone; serving the copy" in caplog.text
    assert list(opened.corpus) == list(corpus) and opened.bm25.search("cell", 3)


def test_an_index_of_an_older_format_asks_for_a_rebuild(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    manifest["format"] = FORMAT - 1
    (tmp_path / "idx" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        IndexMismatchError,
        match=rf"format {FORMAT - 1}, this version reads {FORMAT}; rebuild it with "
        rf"`deepresearch index {corpus_file} --out",
    ):
        open_index(tmp_path / "idx")


def test_rebuilding_over_an_older_index_leaves_none_of_its_files(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    (tmp_path / "idx" / "bm25" / "data.npy").write_bytes(b"format 2 weights")  # a file only the old format had
    (tmp_path / "idx" / "dense").mkdir()
    (tmp_path / "idx" / "dense" / "embeddings.npy").write_bytes(b"of another build")
    rebuilt = build_index(corpus, tmp_path / "idx", source, bm25={})
    assert not (tmp_path / "idx" / "bm25" / "data.npy").exists() and not (tmp_path / "idx" / "dense").exists()
    assert rebuilt.bm25.search("cell", 3) == open_index(tmp_path / "idx").bm25.search("cell", 3) != []


def test_missing_part_and_missing_index_say_what_to_do(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    index = build_index(corpus, tmp_path / "idx", source, bm25={})
    with pytest.raises(ValueError, match="no dense part; rebuild"):
        index.retriever("dense")
    with pytest.raises(IndexMismatchError, match="no index at"):
        open_index(tmp_path / "nothing")


def test_string_table_finds_every_key_and_nothing_else(tmp_path):
    keys = ["b", "a", "ä", "", "ab", "z9", "日本"]
    StringTable.write(tmp_path, "t", keys)
    table = StringTable(tmp_path, "t")
    assert {k: table[k] for k in keys} == {k: i for i, k in enumerate(keys)} and list(table) == keys
    assert table.get("c") is None and "aa" not in table and len(table) == len(keys)
    StringTable.write(tmp_path, "empty", [])
    assert StringTable(tmp_path, "empty").get("a") is None


def test_index_command_builds_an_index_that_reopens_its_corpus(tmp_path, data_dir, scifact, capsys, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    out = tmp_path / "scifact-index"
    assert cli.main(["index", "scifact", "--out", str(out)]) == 0
    assert "indexed 5183 documents" in capsys.readouterr().out
    index = open_index(out)
    assert index.corpus.fingerprint() == scifact.fingerprint()
    assert index.bm25.params()["tokenizer"] == "english"  # the default every command shares
    assert index.retriever("bm25").search("vitamin D", 3)


def test_index_command_reports_bad_lines(tmp_path, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "1", "text": "alpha"}\nbroken\n{"_id": "2", "text": "beta"}\n', encoding="utf-8")
    assert cli.main(["index", str(path), "--out", str(tmp_path / "i")]) == 2
    assert "c.jsonl:2: line is not valid JSON" in capsys.readouterr().err
    assert cli.main(["index", str(path), "--out", str(tmp_path / "i"), "--skip-bad"]) == 0
    assert "skipped 1 bad lines" in capsys.readouterr().err
