"""Every LM call an optimizer makes is held to the command's options, its own calls included (issue 27, item 3):
GEPA's reflection and MIPROv2's proposer answer to `--lm-timeout` as the task LM does."""

from __future__ import annotations

import json

import pytest

from deepresearch import cli
from tests.integration.openai_server import LocalOpenAIServer
from tests.optimize.test_every_target import research_or_anything

# what the optimizers' own prompts carry and the research stages' never do
OWN = {"gepa": "current_instruction", "miprov2": "proposed_instruction"}


@pytest.mark.parametrize("optimizer", ["gepa", "miprov2"])
def test_the_optimizers_own_calls_are_held_to_the_lm_timeout(optimizer, data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))

    def own(body) -> bool:
        return OWN[optimizer] in json.dumps(body)

    # the optimizer's own requests stall for ten minutes; the stages' are answered at once
    with LocalOpenAIServer(research_or_anything(), delay=lambda body: 600.0 if own(body) else 0.0) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                "assess",
                "--metric",
                "f1",
                "--optimizer",
                optimizer,
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "6",
                "--budget",
                "8",
                "--workers",
                "1",
                "--out",
                str(tmp_path / "compiled.json"),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--lm-timeout",
                "1",
                "--no-cache",
                "-q",
            ]
        )
        stalled = [r for r in server.requests if own(r)]
    err = capsys.readouterr().err
    assert stalled, "the optimizer asked for no instruction"
    # each was given up by the client at --lm-timeout, long before the server would have answered it
    assert len(server.abandoned) == len(stalled)
    if optimizer == "gepa":  # a reflection that failed proposes nothing; GEPA carries on with what it has
        assert code == 0, err[-1500:]
    else:  # MIPROv2 cannot go on without its instructions: one line, and the run is kept to resume
        last = err.strip().splitlines()[-1]
        assert code == 2 and "the optimizer stopped on a failed LM call (LMTransportError" in last, err[-1500:]
        assert "rerun the same command to resume" in last and (tmp_path / "compiled.partial").is_dir()
        assert not (tmp_path / "compiled.json").exists()


@pytest.mark.parametrize("optimizer,workers", [("bootstrap-rs", 2), ("gepa", 3)])
def test_no_more_requests_at_once_than_workers(optimizer, workers, data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    with LocalOpenAIServer(research_or_anything(), delay=0.2) as server:  # slow enough for the threads to overlap
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                "assess",
                "--metric",
                "f1",
                "--optimizer",
                optimizer,
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "9",
                "--budget",
                "12",
                "--workers",
                str(workers),
                "--out",
                str(tmp_path / "compiled.json"),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
                "-q",
            ]
        )
    assert code == 0, capsys.readouterr().err[-1500:]
    assert server.most_in_flight == workers  # every worker was used, and never one more


@pytest.mark.parametrize("optimizer", ["bootstrap-rs", "gepa", "miprov2"])
def test_max_lm_calls_holds_for_every_request_the_optimizer_makes(optimizer, data_dir, tmp_path, monkeypatch, capsys):
    # GEPA's reflection and MIPROv2's proposer and dataset summaries used to come on top of the cap (26 and 28
    # requests under --max-lm-calls 20): the metric budget derived from it left them out
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    out = tmp_path / "compiled.json"
    with LocalOpenAIServer(research_or_anything()) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                "assess",
                "--metric",
                "f1",
                "--optimizer",
                optimizer,
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "9",
                "--budget",
                "40",
                "--max-lm-calls",
                "20",
                "--workers",
                "1",
                "--out",
                str(out),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
                "--no-preflight",
                "-q",
            ]
        )
    assert code == 0, capsys.readouterr().err[-1500:]
    assert 10 < len(server.requests) <= 20
    record = json.loads(out.read_text())["metadata"]["deepresearch"]
    assert record["lm_calls"] == len(server.requests) and len(record["after_scores"]) == record["n_dev"]
