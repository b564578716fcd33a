import json
import pytest

import cli
from retrievers.index import IndexMismatchError, build_index, open_index
from retrievers.sources import open_corpus


@pytest.fixture()
def corpus_file(tmp_path, data_dir):
    path = tmp_path / "corpus.jsonl"
    with (data_dir / "scifact" / "corpus.jsonl").open(encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(60)), encoding="utf-8")
    return path


def test_built_index_serves_the_same_results(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    built = build_index(corpus, tmp_path / "idx", source, bm25={"tokenizer": "scholargym"}, dense_model="all-MiniLM-L6-v2")
    opened = open_index(tmp_path / "idx")
    for kind in ("bm25", "dense", "hybrid"):
        assert opened.retriever(kind).search("cell signalling", 10) == built.retriever(kind).search("cell signalling", 10)


def test_changed_corpus_is_refused(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    build_index(corpus, tmp_path / "idx", source, bm25={})
    lines = corpus_file.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[3])
    record["text"] += " edited"
    lines[3] = json.dumps(record) + "\n"
    corpus_file.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="differs from the one index .* was built from"):
        open_index(tmp_path / "idx")


def test_missing_part_and_missing_index_say_what_to_do(tmp_path, corpus_file):
    corpus, source, _ = open_corpus(str(corpus_file))
    index = build_index(corpus, tmp_path / "idx", source, bm25={})
    with pytest.raises(ValueError, match="no dense part; rebuild"):
        index.retriever("dense")
    with pytest.raises(IndexMismatchError, match="no index at"):
        open_index(tmp_path / "nothing")


def test_index_command_builds_an_index_that_reopens_its_corpus(tmp_path, data_dir, scifact, capsys):
    out = tmp_path / "scifact-index"
    assert cli.main(["index", str(data_dir / "scifact"), "--out", str(out)]) == 0
    assert "indexed 5183 documents" in capsys.readouterr().out
    index = open_index(out)
    assert index.corpus.fingerprint() == scifact.fingerprint()
    assert index.bm25.params()["tokenizer"] == "scholargym"
    assert index.retriever("bm25").search("vitamin D", 3)


def test_index_command_reports_bad_lines(tmp_path, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "1", "text": "alpha"}\nbroken\n{"_id": "2", "text": "beta"}\n', encoding="utf-8")
    assert cli.main(["index", str(path), "--out", str(tmp_path / "i")]) == 2
    assert "c.jsonl:2: line is not valid JSON" in capsys.readouterr().err
    assert cli.main(["index", str(path), "--out", str(tmp_path / "i"), "--skip-bad"]) == 0
    assert "skipped 1 bad lines" in capsys.readouterr().err
