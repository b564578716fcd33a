"""`deepresearch optimize` end to end over real HTTP, and the compiled file used by `deepresearch run`."""

import json

import cli
from programs.research import DeepResearch
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler


def test_optimize_assessor_then_run_with_the_compiled_program(data_dir, scifact_bm25, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    out = tmp_path / "compiled.json"
    with LocalOpenAIServer(research_handler()) as server:
        lm = ["--lm", "openai/local-model", "--api-base", server.base_url]
        code = cli.main(["optimize", "--program", "research", "--stage", "assessor", "--metric", "f1",
                         "--optimizer", "bootstrap-rs", "--train", str(data_dir / "scifact"), "--limit", "3",
                         "--budget", "16", "--out", str(out), *lm])
        assert code == 0
        printed = capsys.readouterr().out
        assert "| before |" in printed and "| after (bootstrap-rs) |" in printed
        state = json.loads(out.read_text())
        assert "assessor.assess_relevance" in state and "writer.write_report" in state
        meta = json.loads((tmp_path / "compiled.meta.json").read_text())
        assert meta["optimizer"] == "bootstrap-rs" and meta["metric"] == "f1" and meta["lm_calls"] > 0
        assert (tmp_path / "compiled.candidates.jsonl").read_text().count("\n") == 6  # 3 questions x 2 nodes

        # plain DSPy loads it into the program class
        program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)
        program.load(str(out))
        assert [p.demos for _, p in program.named_predictors()] == [
            state[name]["demos"] for name, _ in program.named_predictors()]

        requests_before = len(server.requests)
        code = cli.main(["run", "statins and muscle pain", "--corpus", "scifact", "--preset", "quick",
                         "--program", str(out), "--out", str(tmp_path / "run"), "--no-progress", *lm])
        assert code == 0 and (tmp_path / "run" / "report.md").exists()
        assert len(server.requests) > requests_before
    assert '"api_key"' not in out.read_text()


def test_optimize_refuses_the_offline_lm(data_dir, capsys):
    code = cli.main(["optimize", "--metric", "recall", "--train", str(data_dir / "scifact"), "--out", "x.json",
                     "--lm", "offline"])
    assert code == 2 and "optimization tunes LM prompts" in capsys.readouterr().err
