"""The demo corpus shipped inside the package, and BEIR datasets in the Hugging Face hub's layout."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys

import pytest

from deepresearch.retrievers.beir import load_qrels, load_queries
from deepresearch.retrievers.corpus import load_corpus
from deepresearch.retrievers.hf import load_hf_corpus
from deepresearch.retrievers.sources import DEFAULT_CORPUS, EMBEDDED, find_local, open_corpus

SCIFACT = EMBEDDED / "scifact"
BEIR_CORPUS_SHA256 = "dec31c8182f3d744c7d2c09423756fd1d17cbef75808db13ba01cc0aab4d1ac6"  # the official BEIR file


def test_the_embedded_corpus_is_beirs_scifact_compressed_and_small():
    files = {p.relative_to(SCIFACT).as_posix(): p.stat().st_size for p in SCIFACT.rglob("*") if p.is_file()}
    assert set(files) == {"corpus.jsonl.gz", "queries.jsonl", "qrels/test.tsv", "qrels/train.tsv", "ATTRIBUTION.md"}
    assert sum(files.values()) < 4_000_000  # a few MB in the wheel
    assert hashlib.sha256(gzip.decompress((SCIFACT / "corpus.jsonl.gz").read_bytes())).hexdigest() == BEIR_CORPUS_SHA256
    attribution = (SCIFACT / "ATTRIBUTION.md").read_text()
    assert "ODC-By 1.0" in attribution and "CC BY 4.0" in attribution and "allenai/scifact" in attribution


def test_scifact_names_the_embedded_corpus_without_a_data_folder():
    assert find_local("scifact", None) == SCIFACT
    assert find_local("BeIR/scifact", None) == SCIFACT  # the hub name finds the local copy first
    corpus, source, skipped = open_corpus(DEFAULT_CORPUS, data_dir=None)
    assert len(corpus) == 5183 and skipped == 0 and source == {"kind": "jsonl", "path": str(SCIFACT), "skip_bad": False}
    assert corpus.get("4983").title.startswith("Microstructural development of human newborn cerebral white matter")
    queries, qrels = load_queries(SCIFACT), load_qrels(SCIFACT, "test")
    assert len(queries) == 1109 and len(qrels) == 300 and all(d in corpus for q in qrels.values() for d in q)


def test_a_data_folder_copy_is_preferred_and_holds_the_same_documents(data_dir):
    assert find_local("scifact", data_dir) == data_dir / "scifact"
    assert load_corpus(data_dir / "scifact").fingerprint() == load_corpus(SCIFACT).fingerprint()


def test_a_gzipped_jsonl_file_is_a_corpus(tmp_path):
    path = tmp_path / "papers.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "a", "title": "T", "text": "body"}) + "\n")
    corpus, source, _ = open_corpus(str(path))
    assert [d.doc_id for d in corpus] == ["a"] and source["kind"] == "jsonl"


def test_run_with_no_corpus_searches_the_embedded_one_offline(tmp_path):
    # a stranger's first command: no --corpus, no $DEEPRESEARCH_DATA, no network, no LM
    env = {k: v for k, v in os.environ.items() if k not in ("DEEPRESEARCH_DATA", "DEEPRESEARCH_LM")}
    env.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "deepresearch.cli",
            "-q",
            "run",
            "Does obesity increase the risk of type 2 diabetes?",
            "--preset",
            "quick",
            "--out",
            "out",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["corpus"]["name"] == "scifact" and trace["corpus"]["documents"] == 5183
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## References" in report and "[1]" in report
    assert "embedded SciFact demo corpus" in done.stderr


# The hub keeps a BEIR dataset as two configurations, `corpus` and `queries`, each with one split of the same
# name, declared in the dataset card's YAML header; there is no default configuration.
HUB_CARD = """---
configs:
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus/corpus-*
- config_name: queries
  data_files:
  - split: queries
    path: queries/queries-*
---
# tiny BEIR dataset in the hub's layout
"""


@pytest.fixture(scope="module")
def hub_copy(tmp_path_factory):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path_factory.mktemp("hub") / "scifact"
    (folder / "corpus").mkdir(parents=True)
    (folder / "queries").mkdir()
    docs = [{"_id": d.doc_id, "title": d.title, "text": d.text} for d in list(load_corpus(SCIFACT))[:20]]
    datasets.Dataset.from_list(docs).to_parquet(str(folder / "corpus" / "corpus-00000-of-00001.parquet"))
    claims = [{"_id": "1", "title": "", "text": "0-dimensional biomaterials show inductive properties."}]
    datasets.Dataset.from_list(claims).to_parquet(str(folder / "queries" / "queries-00000-of-00001.parquet"))
    (folder / "README.md").write_text(HUB_CARD)
    return folder, docs


def test_a_beir_dataset_in_the_hubs_layout_loads_its_corpus_configuration(hub_copy):
    import datasets

    folder, docs = hub_copy
    with pytest.raises(ValueError, match="Config name is missing"):  # what a call without the config got
        datasets.load_dataset(str(folder), split="train")
    corpus = load_hf_corpus(str(folder))
    assert [d.doc_id for d in corpus] == [d["_id"] for d in docs] and corpus[0].title == docs[0]["title"]
    corpus, source, _ = open_corpus(f"hf:{folder}")
    assert len(corpus) == 20 and source["kind"] == "hf"


def test_questions_from_a_beir_dataset_come_from_its_queries_configuration(hub_copy):
    from deepresearch.eval.questions import load_hf_questions

    folder, _ = hub_copy
    (question,) = load_hf_questions(str(folder))
    assert question.qid == "1" and question.text.startswith("0-dimensional biomaterials")
