"""One spec grammar for corpora and query sets: paths, names in the data folder, Hugging Face datasets."""

import json

import pytest

from deepresearch.retrievers import CorpusError
from deepresearch.retrievers.sources import (
    find_local,
    open_corpus,
    resolve_source,
    same_source,
    source_files,
)


def test_paths_of_each_kind(tmp_path, data_dir):
    beir = resolve_source(str(data_dir / "scifact"))
    assert beir == {"kind": "jsonl", "path": str((data_dir / "scifact").resolve()), "skip_bad": False}
    lines = tmp_path / "c.jsonl"
    lines.write_text(json.dumps({"_id": "a", "title": "T", "text": "body"}) + "\n", encoding="utf-8")
    assert resolve_source(str(lines))["kind"] == "jsonl"
    papers = tmp_path / "db.json"
    papers.write_text(json.dumps({"1": {"title": "T", "abstract": "A"}}), encoding="utf-8")
    corpus, source, _ = open_corpus(str(papers))
    assert source["kind"] == "paper_db" and corpus[0].doc_id == "1"
    assert source_files(source) == [papers.resolve()]


@pytest.mark.parametrize("spec", ["scifact", "SciFact", "BeIR/scifact", "beir/SCIFACT"])
def test_names_are_found_in_the_data_folder_case_insensitively(spec, data_dir):
    assert find_local(spec, data_dir) == data_dir / "scifact"
    corpus, source, _ = open_corpus(spec, data_dir=data_dir)
    assert len(corpus) == 5183 and corpus.name == "scifact"
    assert same_source(source, resolve_source(str(data_dir / "scifact")))


def test_hugging_face_specs_resolve_without_loading(tmp_path, data_dir):
    assert resolve_source("hf:BeIR/scifact")["name"] == "BeIR/scifact"  # hf: always means the hub (or a path)
    assert resolve_source("someone/papers", data_dir=data_dir) == {
        "kind": "hf",
        "name": "someone/papers",
        "config": None,
        "split": "train",
        "fields": {},
    }
    assert source_files(resolve_source("someone/papers")) == []
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"_id": "a", "text": "x"}) + "\n", encoding="utf-8")
    assert resolve_source(f"hf:{rows}")["name"] == str(rows.resolve())


def test_a_spec_naming_nothing_lists_the_data_folder(data_dir):
    with pytest.raises(CorpusError, match=r"corpus not found: nothing-here; .*\(csfcube, .*scifact"):
        resolve_source("nothing-here", data_dir=data_dir)
    with pytest.raises(CorpusError, match=r"not set\), or an embedded one \(scifact\)"):
        resolve_source("nothing-here")  # `scifact` is found without a data folder: the package embeds it
    with pytest.raises(CorpusError, match="containing corpus.jsonl"):  # a dataset folder without a corpus
        resolve_source("scholargym", data_dir=data_dir)
