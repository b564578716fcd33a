"""The LM options `eval gather`, `eval report`, `eval taxonomy` and `optimize` share with `run`: every LM a
command will use is checked with one request before its queries, questions, benchmark or corpus are loaded."""

from __future__ import annotations

import argparse
import importlib
import time

import pytest

from deepresearch import cli

DEAD = "http://127.0.0.1:9/v1"  # nothing listens on port 9

# each command with a data path that does not exist, and the error that path gives once the LM check passes
COMMANDS = {
    "gather": (["eval", "gather", "--data", "/no/such/queries"], "query file not found"),
    "report": (
        ["eval", "report", "--data", "/no/such/questions.jsonl", "--corpus", "/no/such/corpus"],
        "unknown question set",
    ),
    "taxonomy": (["eval", "taxonomy", "--data", "/no/such/taxobench"], "TaxoBench data not found"),
    "optimize": (["optimize", "--metric", "recall", "--data", "/no/such/train"], "no such file, folder or dataset"),
}


pytestmark = pytest.mark.usefixtures("clean_lm_env")


def error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_dead_server_fails_in_seconds_before_any_data_is_loaded(command, tmp_path, capsys):
    argv, data_error = COMMANDS[command]
    argv = [
        *argv,
        "--out",
        str(tmp_path / "out" / "compiled.json"),
        "--lm",
        "openai/x",
        "--api-base",
        DEAD,
        "--no-cache",
    ]
    started = time.monotonic()
    code = cli.main(argv)
    assert code == 2 and time.monotonic() - started < 20
    err = error_lines(capsys)
    assert len(err) == 1 and "LM check failed" in err[0] and "could not reach" in err[0], err
    assert data_error not in err[0]

    # without the check the same command gets as far as its data, which is what fails then
    assert cli.main([*argv, "--no-preflight"]) == 2
    err = error_lines(capsys)
    assert len(err) == 1 and data_error in err[0] and "LM check failed" not in err[0], err


@pytest.mark.parametrize("command", ["report", "taxonomy"])
def test_the_judge_lm_is_checked_before_any_data_is_loaded(command, tmp_path, capsys):
    argv, data_error = COMMANDS[command]
    started = time.monotonic()
    code = cli.main(
        [
            *argv,
            "--out",
            str(tmp_path / "out"),
            "--lm",
            "offline",
            "--judge-lm",
            "openai/judge",
            "--api-base",
            DEAD,
            "--no-cache",
        ]
    )
    assert code == 2 and time.monotonic() - started < 20
    err = error_lines(capsys)
    assert len(err) == 1 and "LM check failed" in err[0] and data_error not in err[0], err


@pytest.mark.parametrize(
    "module",
    [
        "deepresearch.cli.eval_gather",
        "deepresearch.cli.eval_report",
        "deepresearch.cli.eval_taxonomy",
        "deepresearch.cli.optimize",
    ],
)
def test_every_command_takes_the_shared_lm_options(module):
    parser = argparse.ArgumentParser()
    importlib.import_module(module).add_arguments(parser)
    options = {o for action in parser._actions for o in action.option_strings}
    assert options >= {
        "--lm",
        "--api-base",
        "--temperature",
        "--structured",
        "--max-output-tokens",
        "--lm-timeout",
        "--no-cache",
        "--cache-dir",
        "--no-preflight",
    }


def test_eval_report_runs_the_program_inside_the_session(tmp_path):
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "q0", "question": "Does vitamin D reduce fracture risk?"}\n')
    with LocalOpenAIServer(research_handler()) as server:
        code = cli.main(
            [
                "eval",
                "report",
                "--data",
                str(questions),
                "--corpus",
                "scifact",
                "--out",
                str(tmp_path / "out"),
                "--lm",
                "openai/local",
                "--api-base",
                server.base_url,
                "--no-cache",
                "--max-output-tokens",
                "333",
            ]
        )
    assert code == 0 and (tmp_path / "out" / "reports" / "q0.md").exists()
    preflight, *work = server.requests
    assert work and len(preflight["messages"]) == 1
    # the session's structured adapter (a schema for an --api-base server) and its output limit reach every request
    assert all(r["response_format"]["type"] == "json_schema" for r in work)
    assert all((r.get("max_tokens") or r.get("max_completion_tokens")) == 333 for r in work)
