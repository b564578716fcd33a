"""`deepresearch optimize` end to end over real HTTP, and the compiled file used by `deepresearch run`."""

import contextlib
import json
import socket

import pytest

from deepresearch import cli
from deepresearch.programs.research.program import DeepResearch
from tests.integration.openai_server import Error, LocalOpenAIServer
from tests.research_lm import research_handler

SECRET = "sk-failed-means-failed-0123456789abcdef"


def test_optimize_assessor_then_run_with_the_compiled_program(data_dir, scifact_bm25, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    out = tmp_path / "compiled.json"
    with LocalOpenAIServer(research_handler()) as server:
        lm = ["--lm", "openai/local-model", "--api-base", server.base_url]
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
                "bootstrap-rs",
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "3",
                "--budget",
                "16",
                "--out",
                str(out),
                *lm,
            ]
        )
        assert code == 0
        printed = capsys.readouterr().out
        assert "| before |" in printed and "| after (bootstrap-rs) |" in printed
        state = json.loads(out.read_text())
        assert "assessor.assess_relevance" in state and "writer.write_report" in state
        meta = json.loads((tmp_path / "compiled.meta.json").read_text())
        assert meta["optimizer"] == "bootstrap-rs" and meta["metric"] == "f1" and meta["lm_calls"] > 0
        assert (tmp_path / "compiled.candidates.jsonl").read_text().count("\n") == 3  # one search a question
        record = state["metadata"]["deepresearch"]  # the compile record travels inside the program file
        assert (record["lm"], record["optimizer"], record["metric"]) == ("openai/local-model", "bootstrap-rs", "f1")
        assert record["data"] == str(data_dir / "scifact") and len(record["before_scores"]) == record["n_dev"]
        assert record["metric_calls"] > 0 and len(record["ci95"]) == 2
        assert cli.main(["optimize", "--show", str(out)]) == 0
        shown = capsys.readouterr().out
        assert "optimizer: bootstrap-rs" in shown and f"before: {record['before']:.4f}" in shown
        assert "before_scores" not in shown

        # plain DSPy loads it into the program class
        program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)
        program.load(str(out))
        assert [p.demos for _, p in program.named_predictors()] == [
            state[name]["demos"] for name, _ in program.named_predictors()
        ]

        requests_before = len(server.requests)
        code = cli.main(
            [
                "run",
                "statins and muscle pain",
                "--corpus",
                "scifact",
                "--preset",
                "quick",
                "--program",
                str(out),
                "--out",
                str(tmp_path / "run"),
                "-q",
                *lm,
            ]
        )
        assert code == 0 and (tmp_path / "run" / "report.md").exists()
        assert len(server.requests) > requests_before
    assert '"api_key"' not in out.read_text()


def test_optimize_refuses_the_offline_lm(data_dir, capsys):
    code = cli.main(
        ["optimize", "--metric", "recall", "--data", str(data_dir / "scifact"), "--out", "x.json", "--lm", "offline"]
    )
    assert code == 2 and "optimization tunes LM prompts" in capsys.readouterr().err


@pytest.mark.parametrize("check", [[], ["--no-preflight"]])
def test_an_out_that_cannot_be_written_fails_before_any_lm_request(check, data_dir, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, so no folder can be made under it")
    with LocalOpenAIServer(research_handler()) as server:
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
                "bootstrap-rs",
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "3",
                "--out",
                str(blocker / "sub" / "compiled.json"),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
                *check,
            ]
        )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot write to {blocker / 'sub'}" in err[0], err
    assert server.requests == []  # not even the preflight: the folder is checked first


@pytest.mark.parametrize("out,message", [("compiled.txt", "should be a .json file"), (".", "is a folder")])
def test_an_out_that_is_no_json_file_is_refused(out, message, data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert (
        cli.main(
            [
                "optimize",
                "--metric",
                "recall",
                "--data",
                str(data_dir / "scifact"),
                "--out",
                out,
                "--lm",
                "openai/x",
                "--api-base",
                "http://127.0.0.1:9/v1",
            ]
        )
        == 2
    )
    assert message in capsys.readouterr().err


def test_the_whole_program_is_saved_and_every_lm_request_is_counted(data_dir, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "compiled.json"  # missing folders are created
    with LocalOpenAIServer(research_handler()) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                "all",
                "--metric",
                "recall",
                "--optimizer",
                "bootstrap-rs",
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "3",
                "--budget",
                "8",
                "--workers",
                "1",
                "--out",
                str(out),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 0
    requests = len(server.requests) - 1  # all but the preflight
    assert requests > 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"compiled: {out}  (LM calls: {requests}: task {requests})"
    meta = json.loads(out.with_name("compiled.meta.json").read_text())
    assert meta["lm_calls"] == requests and meta["stage"] == "all" and meta["lm"] == "openai/local-model"
    state = json.loads(out.read_text())
    assert "assessor.assess_relevance" in state and "writer.write_report" in state


@pytest.mark.parametrize("stage,attr", [("write", "writer"), ("extract", "extractor")])
def test_tuning_one_stage_saves_a_program_whose_other_stages_are_untouched(
    stage, attr, data_dir, scifact_bm25, tmp_path
):
    from deepresearch.programs.config import preset
    from deepresearch.programs.research.program import DeepResearch

    out = tmp_path / "compiled.json"
    with LocalOpenAIServer(research_handler()) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                stage,
                "--metric",
                "recall",
                "--optimizer",
                "bootstrap-rs",
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "3",
                "--budget",
                "8",
                "--workers",
                "1",
                "--out",
                str(out),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 0
    saved = json.loads(out.read_text())
    untuned = DeepResearch(retriever=scifact_bm25, config=preset("quick")).dump_state()
    others = {k for k in untuned if not k.startswith(f"{attr}.")}
    assert {k: saved[k] for k in others} == {k: untuned[k] for k in others}  # byte-identical as JSON values
    tuned = DeepResearch(retriever=scifact_bm25, config=preset("quick"))
    tuned.load(str(out))  # loads with plain dspy
    # (whether the stage itself changed is the optimizer's call: against this scripted LM, demos do not raise
    # the metric, and bootstrap-rs may keep the baseline; which predictors it saw is tested in test_targets.py)


@pytest.mark.parametrize("stage", ["clarify", "answer", "taxonomy"])
def test_a_stage_no_research_metric_scores_is_refused_before_any_lm_request(stage, data_dir, tmp_path, capsys):
    with LocalOpenAIServer(research_handler()) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                stage,
                "--metric",
                "recall",
                "--data",
                str(data_dir / "scifact"),
                "--out",
                str(tmp_path / "c.json"),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 2 and server.requests == []
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--stage {stage}:" in err and "choose another stage" in err


def test_the_taxonomy_program_is_tuned_saved_and_loads(data_dir, tmp_path, capsys):
    # it used to spend its whole budget and then fail on saving ('tuple' object has no attribute 'values')
    from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
    from tests.scripted import universal_handler

    out = tmp_path / "taxonomy.json"
    with LocalOpenAIServer(universal_handler()) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "taxonomy",
                "--metric",
                "ari",
                "--optimizer",
                "bootstrap-rs",
                "--data",
                str(data_dir / "taxobench_examples"),
                "--budget",
                "2",
                "--workers",
                "1",
                "--out",
                str(out),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 0, capsys.readouterr().err[-500:]
    TaxonomyBuilder().load(str(out))
    assert json.loads(out.with_name("taxonomy.meta.json").read_text())["program"] == "taxonomy"


def test_miprov2_with_one_training_example_is_refused_before_any_lm_request(data_dir, tmp_path, capsys):
    from tests.scripted import universal_handler

    with LocalOpenAIServer(universal_handler()) as server:
        code = cli.main(
            [
                "optimize",
                "--program",
                "taxonomy",
                "--metric",
                "ari",
                "--optimizer",
                "miprov2",
                "--data",
                str(data_dir / "taxobench_examples"),
                "--budget",
                "2",
                "--out",
                str(tmp_path / "t.json"),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 2 and len(server.requests) == 1  # the preflight only
    assert "miprov2 needs at least 2 training examples, got 1" in capsys.readouterr().err


def test_gepa_reflection_calls_are_counted_too(data_dir, tmp_path, capsys):
    # DSPy's usage tracker missed the calls GEPA makes to propose instructions (14 counted of 30 requests);
    # the LMs' own callbacks see every call, from any thread
    from tests.optimize.test_every_target import research_or_anything

    runs = tmp_path / "runs"
    assert (
        cli.main(
            [
                "run",
                "Does obesity increase the risk of type 2 diabetes?",
                "--corpus",
                str(data_dir / "scifact"),
                "--depth",
                "2",
                "--breadth",
                "2",
                "--lm",
                "offline",
                "--stage-log",
                "--out",
                str(runs / "q"),
                "-q",
            ]
        )
        == 0
    )
    out = tmp_path / "merge.json"
    with LocalOpenAIServer(research_or_anything()) as server:
        code = cli.main(
            [
                "optimize",
                "--stage",
                "merge",
                "--from-runs",
                str(runs),
                "--metric",
                "quality",
                "--optimizer",
                "gepa",
                "--budget",
                "8",
                "--workers",
                "1",
                "--out",
                str(out),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 0, capsys.readouterr().err[-500:]
    proposals = [r for r in server.requests if "current_instruction" in json.dumps(r)]
    assert proposals  # GEPA did ask for new instructions
    meta = json.loads(out.with_name("merge.meta.json").read_text())
    assert meta["lm_calls"] == len(server.requests) - 1  # all but the preflight


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def failing_server(kind: str):
    """A base URL (in a `with`) whose every LM request fails: a port nothing listens on, or a server that
    answers an HTTP error (500, or 404: not retried) to all but the preflight; yields (base URL, server)."""
    if kind == "nothing listens":
        return contextlib.nullcontext((f"http://127.0.0.1:{unused_port()}/v1", None))
    status = int(kind.split()[-1])

    def handler(messages):
        return "OK" if "Reply with the word OK" in messages[-1]["content"] else Error(status, "boom")

    @contextlib.contextmanager
    def serving():
        with LocalOpenAIServer(handler) as server:
            yield server.base_url, server

    return serving()


def optimize_all(out, base_url, corpus, *extra):
    return cli.main(
        [
            "optimize",
            "--program",
            "research",
            "--metric",
            "recall",
            "--optimizer",
            "bootstrap-rs",
            "--data",
            "scifact",
            "--corpus",
            str(corpus),
            "--limit",
            "3",
            "--budget",
            "8",
            "--out",
            str(out),
            "--lm",
            "openai/local-model",
            "--api-base",
            base_url,
            "--no-cache",
            *extra,
        ]
    )


@pytest.mark.parametrize("kind", ["nothing listens", "HTTP 500"])
def test_with_every_lm_call_failing_nothing_is_tuned_or_saved_and_the_exit_is_non_zero(
    kind, data_dir, scifact_head, tmp_path, monkeypatch, capsys
):
    # it saved a compiled program "scored 0.0 -> 0.0" and exited 0: the research program catches the failures
    # of its stages, so every dev example "ran", and the tuning spent its budget on a server that never answered
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", SECRET)
    out = tmp_path / "runs" / "compiled.json"
    with failing_server(kind) as (base_url, server):
        code = optimize_all(out, base_url, scifact_head(300), *(["--no-preflight"] if server is None else []))
        sent = len(server.requests) if server is not None else None
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == 3 and len(lines) == 1, err
    line = lines[0]
    assert line.startswith("deepresearch optimize: error: no dev example got an answer from the model before tuning")
    assert base_url in line and "none answered" in line and "no compiled program was saved" in line
    assert ("could not reach" if server is None else "server error") in line
    assert SECRET not in err
    assert not (tmp_path / "runs").exists()  # no compiled file, no record, no working folder, no empty folder
    if server is not None:
        assert sent > 1  # the dev examples were run (the preflight was answered); nothing after them


def test_keep_partial_keeps_the_working_folder_of_a_run_the_model_never_answered(
    data_dir, scifact_head, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    out = tmp_path / "compiled.json"
    with failing_server("HTTP 404") as (base_url, _):
        code = optimize_all(out, base_url, scifact_head(300), "--keep-partial")
    err = capsys.readouterr().err
    assert code == 3 and "not found at" in err and f"{tmp_path / 'compiled.partial'} is kept" in err
    assert not out.exists() and not (tmp_path / "compiled.meta.json").exists()
    kept = tmp_path / "compiled.partial"
    assert (kept / "manifest.json").exists()
    assert not (kept / "dev_before.jsonl").exists()  # those scores stood for no answer: a rerun scores again
