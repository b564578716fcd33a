"""Any retriever, one opener (issue 14, item 1), end to end through the command line.

`run`, `eval gather`, `eval retrieval`, `eval report`, `eval taxonomy` and `optimize` read corpora and
indexes with one grammar and one opener; `--retriever` and `--index` (or `--qdrant-url`) choose what
searches; an index serves with its own tokenizer and BM25 settings, and the default keeps digits.
"""

import json
import re

import pytest

from deepresearch import cli
from deepresearch.retrievers.beir import load_qrels, load_queries
from deepresearch.retrievers.corpus import load_corpus
from deepresearch.retrievers.index import FORMAT

QUESTION = "Does vitamin D supplementation reduce fracture risk?"
SMALL = 60


@pytest.fixture(autouse=True)
def data_env(monkeypatch, data_dir):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)


@pytest.fixture(scope="module")
def scifact_index(tmp_path_factory, data_dir):
    folder = tmp_path_factory.mktemp("index") / "scifact"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPRESEARCH_DATA", str(data_dir))
        assert cli.main(["index", "BeIR/scifact", "--out", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def small_corpus_file(scifact_head):
    return scifact_head(SMALL)


def run(out, *extra, question=QUESTION, code=0) -> dict:
    argv = ["run", question, "--depth", "1", "--breadth", "2", "--lm", "offline", "--out", str(out), "-q"]
    assert cli.main([*argv, *extra]) == code
    return json.loads((out / "trace.json").read_text())


def retrieved(trace: dict) -> list[str]:
    return [doc_id for node in trace["tree"] for doc_id in node["retrieved_ids"]]


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_run_by_name_and_through_an_index_research_the_same(scifact_index, tmp_path):
    by_name = run(tmp_path / "name", "--corpus", "BeIR/scifact")  # the hub name finds the local copy
    by_index = run(tmp_path / "index", "--index", str(scifact_index))
    both = run(tmp_path / "both", "--corpus", "scifact", "--index", str(scifact_index))
    assert by_name["tree"] == by_index["tree"] == both["tree"] and retrieved(by_index)
    assert by_name["corpus"]["index"] is None and by_index["corpus"]["index"] == str(scifact_index)
    assert by_name["corpus"]["bm25"] == by_index["corpus"]["bm25"]
    assert (by_index["corpus"]["name"], by_index["corpus"]["documents"]) == ("scifact", 5183)


def test_an_index_serves_with_its_own_tokenizer(tmp_path, data_dir, scifact_index, capsys):
    holds = {
        d.doc_id for d in load_corpus(data_dir / "scifact") if re.search(r"\bp53\b", f"{d.title} {d.text}".lower())
    }
    default = run(tmp_path / "default", "--index", str(scifact_index), "--breadth", "1", question="p53")
    assert default["corpus"]["bm25"]["tokenizer"] == "english"
    assert retrieved(default) and set(retrieved(default)) <= holds  # the default keeps tokens with digits
    assert cli.main(["index", "scifact", "--out", str(tmp_path / "sg"), "--bm25-preset", "scholargym"]) == 0
    # p53 is dropped: nothing is retrieved, so the run keeps no evidence and ends partial (exit 3)
    spec004 = run(tmp_path / "spec004", "--index", str(tmp_path / "sg"), "--breadth", "1", question="p53", code=3)
    assert spec004["corpus"]["bm25"]["tokenizer"] == "scholargym" and retrieved(spec004) == []
    assert spec004["status"] == "partial"
    capsys.readouterr()
    assert (
        cli.main(
            [
                "run",
                "p53",
                "--index",
                str(tmp_path / "sg"),
                "--tokenizer",
                "english",
                "--lm",
                "offline",
                "--out",
                str(tmp_path / "conflict"),
            ]
        )
        == 2
    )
    assert "was built with tokenizer='scholargym', not 'english'" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("term", ["BRCA1", "H1N1"])
def test_terms_with_digits_find_their_documents_through_run(scifact_index, data_dir, tmp_path, term):
    holds = {d.doc_id for d in load_corpus(data_dir / "scifact") if term.lower() in f"{d.title} {d.text}".lower()}
    trace = run(tmp_path / term, "--index", str(scifact_index), "--breadth", "1", question=term)  # the term as query
    assert retrieved(trace) and set(retrieved(trace)) <= holds


def test_an_old_or_stale_index_asks_for_a_rebuild_in_one_line(tmp_path, small_corpus_file, capsys):
    folder = tmp_path / "old"
    assert cli.main(["index", str(small_corpus_file), "--out", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    capsys.readouterr()
    assert cli.main(["run", QUESTION, "--index", str(folder), "--lm", "offline", "--out", str(tmp_path / "o")]) == 2
    assert f"has format 1, this version reads {FORMAT}; rebuild it with `deepresearch index" in one_error_line(
        capsys.readouterr().err
    )
    # with no index (and no corpus) the run searches the embedded demo corpus: the stale index was the only problem
    assert cli.main(["run", QUESTION, "--lm", "offline", "--out", str(tmp_path / "o")]) == 0
    assert json.loads((tmp_path / "o" / "trace.json").read_text())["corpus"]["name"] == "scifact"


def test_run_with_dense_hybrid_and_qdrant_retrievers(tmp_path, small_corpus_file, encoded, capsys, caplog):
    corpus = ["--corpus", str(small_corpus_file)]
    dense = run(tmp_path / "dense", *corpus, "--retriever", "dense")
    assert f"embedding {SMALL} documents in memory" in caplog.text and SMALL in encoded  # a warning on stderr
    hybrid = run(tmp_path / "hybrid", *corpus, "--retriever", "hybrid")
    qdrant = run(tmp_path / "qdrant", *corpus, "--retriever", "qdrant", "--qdrant-mode", "bm25")
    assert (dense["corpus"]["retriever"], dense["corpus"]["dense"]) == (
        "dense",
        "sentence-transformers/all-MiniLM-L6-v2",
    )
    assert hybrid["corpus"]["retriever"] == "hybrid" and qdrant["corpus"]["qdrant"] == ":memory:"
    assert all(retrieved(t) for t in (dense, hybrid, qdrant))

    assert (
        cli.main(["index", str(small_corpus_file), "--out", str(tmp_path / "idx"), "--dense-model", "all-MiniLM-L6-v2"])
        == 0
    )
    encoded.clear()
    for kind in ("dense", "hybrid", "qdrant"):
        trace = run(tmp_path / f"index-{kind}", "--index", str(tmp_path / "idx"), "--retriever", kind)
        assert trace["corpus"]["retriever"] == kind and trace["corpus"]["index"] == str(tmp_path / "idx")
        assert retrieved(trace)
    assert max(encoded) < SMALL  # the index's embeddings were used: only questions and queries were encoded
    assert (tmp_path / "idx" / "qdrant").is_dir()

    capsys.readouterr()
    assert (
        cli.main(
            [
                "run",
                QUESTION,
                *corpus,
                "--qdrant-url",
                "http://127.0.0.1:9",
                "--qdrant-mode",
                "bm25",
                "--lm",
                "offline",
                "--out",
                str(tmp_path / "down"),
            ]
        )
        == 2
    )
    assert "cannot reach Qdrant at http://127.0.0.1:9" in one_error_line(capsys.readouterr().err)


def test_eval_gather_finds_query_sets_and_corpora_by_name(scifact_index, tmp_path):
    base = ["eval", "gather", "--method", "raw", "--lm", "offline", "--limit", "5", "--bootstrap", "20", "-q"]
    assert cli.main([*base, "--data", "scifact", "--out", str(tmp_path / "name")]) == 0
    assert (
        cli.main([*base, "--data", "BeIR/scifact", "--index", str(scifact_index), "--out", str(tmp_path / "idx")]) == 0
    )
    by_name, by_index = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("name", "idx"))
    assert by_name["final"] == by_index["final"] and by_name["evaluated"] == 5
    settings = json.loads((tmp_path / "idx" / "run.json").read_text())
    assert settings["retriever"]["index"] == str(scifact_index) and settings["split"] == "test"
    assert (
        cli.main(
            [
                *base,
                "--data",
                "shenhao/ScholarGym",
                "--corpus",
                "scifact",
                "--limit",
                "3",
                "--out",
                str(tmp_path / "sg"),
            ]
        )
        == 0
    )  # the local copy of the hub query set
    settings = json.loads((tmp_path / "sg" / "run.json").read_text())
    # ScholarGym's own tokenizer and split
    assert settings["retriever"]["bm25"]["tokenizer"] == "scholargym" and settings["split"] == "all"


def beir_subset(data_dir, folder, n_queries=12, n_others=100):
    """A small BEIR folder from SciFact: some test queries, their relevant documents and others."""
    qrels = load_qrels(data_dir / "scifact", "test")
    chosen = dict(list(qrels.items())[:n_queries])
    relevant = {d for judged in chosen.values() for d in judged}
    docs = [d for i, d in enumerate(load_corpus(data_dir / "scifact")) if i < n_others or d.doc_id in relevant]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n" for d in docs), encoding="utf-8"
    )
    texts = load_queries(data_dir / "scifact")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": texts[q]}) + "\n" for q in chosen), encoding="utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{s}\n" for q, judged in chosen.items() for d, s in judged.items()),
        encoding="utf-8",
    )
    return len(docs), len(chosen)


def test_eval_retrieval_through_an_index_reuses_its_embeddings(data_dir, tmp_path, encoded):
    n_docs, n_queries = beir_subset(data_dir, tmp_path / "subset")
    assert (
        cli.main(
            ["index", str(tmp_path / "subset"), "--out", str(tmp_path / "idx"), "--dense-model", "all-MiniLM-L6-v2"]
        )
        == 0
    )
    assert encoded == [n_docs]
    encoded.clear()
    assert (
        cli.main(
            [
                "eval",
                "retrieval",
                "--corpus",
                str(tmp_path / "subset"),
                "--index",
                str(tmp_path / "idx"),
                "--json",
                str(tmp_path / "index.json"),
            ]
        )
        == 0
    )
    assert encoded == [n_queries]  # the queries only: the corpus was not encoded again
    encoded.clear()
    assert (
        cli.main(["eval", "retrieval", "--corpus", str(tmp_path / "subset"), "--json", str(tmp_path / "memory.json")])
        == 0
    )
    assert encoded == [n_docs, n_queries]
    from_index, in_memory = (json.loads((tmp_path / f).read_text()) for f in ("index.json", "memory.json"))
    assert set(from_index["scores"]) == {"bm25", "dense", "hybrid"}
    assert from_index["scores"] == in_memory["scores"] and from_index["bm25"] == in_memory["bm25"]
    assert from_index["index"] == str(tmp_path / "idx") and in_memory["index"] is None


def test_eval_retrieval_scores_the_default_bm25_on_scifact(scifact_index, tmp_path, capsys):
    assert (
        cli.main(
            [
                "eval",
                "retrieval",
                "--corpus",
                "scifact",
                "--index",
                str(scifact_index),
                "--retriever",
                "bm25",
                "--json",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    scores = json.loads((tmp_path / "s.json").read_text())
    assert scores["bm25"]["tokenizer"] == "english" and list(scores["scores"]) == ["bm25"]
    assert scores["scores"]["bm25"]["ndcg@10"] == pytest.approx(0.6828, abs=5e-4)  # BEIR publishes 0.665


def test_eval_retrieval_scores_what_an_index_without_embeddings_holds(scifact_index, tmp_path, capsys):
    # hybrid is the default; an index built without --dense-model is scored with BM25 alone, and said so
    assert (
        cli.main(
            [
                "eval",
                "retrieval",
                "--corpus",
                "scifact",
                "--index",
                str(scifact_index),
                "--json",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    assert "has no dense part: BM25 only" in capsys.readouterr().err
    scores = json.loads((tmp_path / "s.json").read_text())
    assert list(scores["scores"]) == ["bm25"] and scores["dense"] is None
    assert scores["scores"]["bm25"]["ndcg@10"] == pytest.approx(0.6828, abs=5e-4)
    # asking for hybrid by name still fails, in one line that says why
    assert (
        cli.main(["eval", "retrieval", "--corpus", "scifact", "--index", str(scifact_index), "--retriever", "hybrid"])
        == 2
    )
    assert "dense" in capsys.readouterr().err


def test_eval_report_and_taxonomy_search_an_index(scifact_index, data_dir, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q0", "question": QUESTION}) + "\n")
    assert (
        cli.main(
            [
                "eval",
                "report",
                "--data",
                str(questions),
                "--lm",
                "offline",
                "--preset",
                "quick",
                "--index",
                str(scifact_index),
                "--out",
                str(tmp_path / "report"),
            ]
        )
        == 0
    )
    row = json.loads((tmp_path / "report" / "scores.jsonl").read_text().splitlines()[0])
    assert row["qid"] == "q0" and row["n_sources"] > 0
    assert (
        cli.main(
            [
                "eval",
                "taxonomy",
                "--data",
                str(data_dir / "taxobench_examples"),
                "--mode",
                "deep-research",
                "--lm",
                "offline",
                "--sim",
                "exact",
                "--limit",
                "1",
                "--depth",
                "1",
                "--breadth",
                "2",
                "--index",
                str(scifact_index),
                "--out",
                str(tmp_path / "taxonomy"),
            ]
        )
        == 0
    )
    settings = json.loads((tmp_path / "taxonomy" / "run.json").read_text())
    assert settings["corpus"].startswith("scifact:")


def test_optimize_searches_the_corpus_an_index_holds(scifact_index, tmp_path, capsys):
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    with LocalOpenAIServer(research_handler()) as server:
        lm = ["--lm", "openai/local-model", "--api-base", server.base_url]
        common = [
            "optimize",
            "--program",
            "research",
            "--stage",
            "assess",
            "--metric",
            "f1",
            "--optimizer",
            "bootstrap-rs",
            "--data",
            "scifact",
            "--limit",
            "2",
            "--budget",
            "8",
            *lm,
        ]
        assert (
            cli.main(
                [*common, "--index", str(scifact_index), "--tokenizer", "words", "--out", str(tmp_path / "bad.json")]
            )
            == 2
        )
        assert "built with tokenizer='english', not 'words'" in one_error_line(capsys.readouterr().err)
        assert cli.main([*common, "--index", str(scifact_index), "--out", str(tmp_path / "compiled.json")]) == 0
    assert json.loads((tmp_path / "compiled.meta.json").read_text())["lm_calls"] > 0
