"""`deepresearch run --source ...` end to end and offline: the engines' servers are local replays of recorded
answers (tests/retrievers/test_engines.py), found through the base-URL environment variables."""

from __future__ import annotations

import json
import logging

import pytest

from deepresearch import cli
from deepresearch.retrievers.engines import SearchEngine
from tests.retrievers.test_engines import Replay, arxiv_routes, openalex_routes, refused_url, serve

QUESTION = "What is retrieval-augmented generation?"


@pytest.fixture
def servers(monkeypatch, tmp_path, clean_lm_env):
    """OpenAlex and arXiv replays behind $DEEPRESEARCH_OPENALEX_URL and $DEEPRESEARCH_ARXIV_URL; no waits between
    requests, short backoffs, the response cache in the test's folder."""
    replays = {"openalex": Replay(), "arxiv": Replay()}
    openalex_routes(replays["openalex"])
    arxiv_routes(replays["arxiv"])
    running = [serve(r) for r in replays.values()]
    monkeypatch.setenv("DEEPRESEARCH_OPENALEX_URL", replays["openalex"].url)
    monkeypatch.setenv("DEEPRESEARCH_ARXIV_URL", replays["arxiv"].url)
    monkeypatch.setenv("DEEPRESEARCH_ENGINE_CACHE", str(tmp_path / "engine-cache"))
    for name in ("OPENALEX_MAILTO", "S2_API_KEY", "NCBI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for cls in SearchEngine.__subclasses__():
        monkeypatch.setattr(cls, "min_interval", 0.0)  # arXiv's 3 s are for the real service
    monkeypatch.setattr(SearchEngine, "backoff_s", 0.01)
    yield replays
    for server in running:
        server.shutdown()
        server.server_close()


def run(tmp_path, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "run"
    code = cli.main(
        ["run", QUESTION, "--lm", "offline", "--depth", "1", "--breadth", "2", "--out", str(out), "-q", *extra]
    )
    trace = json.loads((out / "trace.json").read_text()) if (out / "trace.json").exists() else {}
    report = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    return code, trace, report


def test_run_with_two_engines_and_no_corpus(servers, tmp_path, capsys):
    code, trace, report = run(tmp_path, "--source", "openalex", "--source", "arxiv", "--bibtex")
    assert code == 0, capsys.readouterr().err
    assert [s["name"] for s in trace["corpus"]["sources"]] == ["openalex", "arxiv"]
    assert trace["corpus"]["sources"][0]["url"] == servers["openalex"].url and trace["corpus"]["retriever"] == "sources"
    assert trace["status"] == "done" and trace["source_failures"] == []
    assert servers["openalex"].requests and servers["arxiv"].requests
    assert "## References" in report
    # the paper both engines found is one reference, with what each engine knew of it
    assert report.count("Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks") == 1
    bib = (tmp_path / "run" / "references.bib").read_text()
    assert "Patrick Lewis" in bib


def test_run_fuses_a_local_corpus_with_an_engine(servers, tmp_path, capsys):
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text(
        json.dumps(
            {
                "_id": "local-1",
                "title": "Retrieval-augmented generation in practice",
                "text": "Retrieval-augmented generation grounds a language model in retrieved passages.",
            }
        )
        + "\n"
    )
    code, trace, _ = run(tmp_path, "--corpus", str(corpus), "--source", "arxiv")
    assert code == 0, capsys.readouterr().err
    assert trace["corpus"]["name"] == "mine.jsonl" and [s["name"] for s in trace["corpus"]["sources"]] == [
        "corpus",
        "arxiv",
    ]
    retrieved = {i for node in trace["tree"] for i in node["retrieved_ids"]}
    assert "local-1" in retrieved and "arxiv:2005.11401" in retrieved


def test_one_engine_down_the_run_goes_on_and_names_it(servers, tmp_path, monkeypatch, capsys, caplog):
    down = refused_url()
    monkeypatch.setenv("DEEPRESEARCH_ARXIV_URL", down)
    caplog.set_level(logging.WARNING)
    code, trace, report = run(tmp_path, "--source", "openalex", "--source", "arxiv")
    assert code == 0
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("deepresearch.retrievers.engines")]
    where = down[len("http://") :]
    assert lines == [
        (f"arxiv: search failed (connection refused at {where} (4 attempts)); continuing with the other sources")
    ]  # one line, however many searches it missed
    failures = trace["source_failures"]
    assert failures and {f["source"] for f in failures} == {"arxiv"}
    assert failures[0]["error"].startswith(f"connection refused at {where}") and not failures[0]["skipped"]
    assert trace["status"] == "done" and trace["stats"]["failed_nodes"] == 0
    assert trace["references"] and servers["openalex"].requests  # the report rests on the engine that answered
    err = capsys.readouterr().err
    assert f"deepresearch run: arxiv: {len(failures)} search" in err and "connection refused" in err


def test_every_engine_down_fails_the_run_as_failed_searches_do(servers, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPRESEARCH_OPENALEX_URL", refused_url())
    monkeypatch.setenv("DEEPRESEARCH_ARXIV_URL", refused_url())
    code, trace, report = run(tmp_path, "--source", "openalex", "--source", "arxiv")
    assert code == 3
    assert trace["status"] == "failed" and trace["stats"]["citations"] == 0
    errors = [node["error"] for node in trace["tree"]]
    assert errors and all(e["stage"] == "search" and e["error_type"] == "SourcesFailed" for e in errors)
    assert all(
        e["message"].startswith("every source failed: openalex: ") and "; arxiv: " in e["message"] for e in errors
    )
    err = capsys.readouterr().err
    assert (
        "deepresearch run: error: no search ran: SourcesFailed from openalex+arxiv: every source failed: "
        "openalex: connection refused at " in err
    )
    assert report.startswith("# Research failed: no search ran: SourcesFailed from openalex+arxiv")
    assert "No sources were cited." in report  # not an empty, confident report


def test_unknown_source_is_refused_in_one_line(clean_lm_env, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", QUESTION, "--source", "scholar"])
    assert exit_.value.code == 2
    assert "unknown source 'scholar'; choose from: openalex, semanticscholar, arxiv, pubmed" in capsys.readouterr().err


def test_no_corpus_and_no_source_searches_the_bundled_corpus_and_says_so(clean_lm_env, tmp_path, capsys):
    # with nothing named, the run searches SciFact (bundled with the package) rather than the engines, in one line
    question = "Does vitamin D supplementation reduce fracture risk?"  # SciFact is biomedicine
    assert (
        cli.main(["run", question, "--lm", "offline", "--depth", "1", "--breadth", "1", "--out", str(tmp_path / "o")])
        == 0
    )
    err = capsys.readouterr().err
    assert "no --corpus given; searching the" in err and "--corpus scifact" in err
    assert json.loads((tmp_path / "o" / "trace.json").read_text())["stats"]["searches"] >= 1
