"""An interrupted `deepresearch optimize` resumes where it stopped (issue 27, item 3).

A scripted OpenAI-compatible server answers over real HTTP; the first run is a real process killed by the
server once a set number of requests arrived. Rerunning the same command must send exactly the requests the
killed run had not had answered, and end with the program and the figures an uninterrupted run gets.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from deepresearch import cli
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler

KEY = "sk-resume7Hq29LmPz81KdWv3Rt"  # sent to the server as its key; must never reach the working folder
FIGURES = ("before", "after", "before_scores", "after_scores", "metric_budget", "metric_calls", "n_train", "n_dev")


def command(
    data_dir: Path, out: Path, base_url: str, *extra: str, metric: str = "f1", optimizer: str = "bootstrap-rs"
) -> list[str]:
    """One optimize command: the research assessor on 6 SciFact claims (4 train, 2 dev), one worker so the
    requests come in one order."""
    return [
        "optimize",
        "--program",
        "research",
        "--stage",
        "assess",
        "--metric",
        metric,
        "--optimizer",
        optimizer,
        "--data",
        str(data_dir / "scifact"),
        "--limit",
        "6",
        "--budget",
        "16",
        "--workers",
        "1",
        "--out",
        str(out),
        "--lm",
        "openai/local-model",
        "--api-base",
        base_url,
        "--no-cache",  # no shared cache: every answer a rerun does not pay for comes from the run's own folder
        "--no-preflight",
        *extra,
    ]


def key(request: dict) -> str:
    return hashlib.sha1(json.dumps(request, sort_keys=True).encode()).hexdigest()


def program_and_figures(out: Path) -> tuple[dict, dict]:
    state = json.loads(out.read_text())
    record = state.pop("metadata")["deepresearch"]
    return state, {name: record[name] for name in FIGURES}


@pytest.fixture
def uninterrupted(data_dir, tmp_path, monkeypatch):
    """The requests and the result of the run never interrupted."""
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", KEY)
    out = tmp_path / "whole" / "compiled.json"
    with LocalOpenAIServer(research_handler()) as server:
        assert cli.main(command(data_dir, out, server.base_url)) == 0
    assert not out.with_suffix(".partial").exists()  # removed once the program was saved
    return list(server.requests), out


@pytest.mark.parametrize("answered", [1, 9])  # killed during the dev evaluation before tuning; during tuning
def test_a_killed_run_resumes_sending_only_what_it_had_not_been_answered(
    answered, uninterrupted, data_dir, tmp_path, capsys
):
    whole, whole_out = uninterrupted
    assert len(whole) > answered + 4
    out = tmp_path / "cut" / "compiled.json"
    process: dict[str, subprocess.Popen] = {}
    scripted = research_handler()

    def killing(messages):
        if len(server.requests) == answered + 1:  # this request is never answered: the process dies first
            process["p"].send_signal(signal.SIGKILL)
        return scripted(messages)

    with LocalOpenAIServer(killing) as server:
        process["p"] = subprocess.Popen(
            [sys.executable, "-m", "deepresearch.cli", *command(data_dir, out, server.base_url)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        _, err = process["p"].communicate(timeout=300)
        assert process["p"].returncode == -signal.SIGKILL, err[-2000:]
        first = list(server.requests)
        assert [key(r) for r in first] == [key(r) for r in whole[: answered + 1]]  # the same run, cut short
        work = out.with_suffix(".partial")
        leaked = [p for p in work.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
        assert (work / "manifest.json").exists() and leaked == []

        assert cli.main(command(data_dir, out, server.base_url)) == 0  # the same command again
        second = server.requests[len(first) :]
    done = {key(r) for r in whole[:answered]}
    expected = [key(r) for r in whole[answered:] if key(r) not in done]
    assert [key(r) for r in second] == expected  # the answered requests are not sent again, nothing else changes
    assert len(second) == len(whole) - answered - sum(key(r) in done for r in whole[answered:])
    err = capsys.readouterr().err
    dev_scored = min(answered, 2)  # one request per dev example before tuning, 2 dev examples
    assert f"{dev_scored} of 2 dev scores before tuning, {len(done)} LM answers recorded" in err
    assert program_and_figures(out) == program_and_figures(whole_out)
    assert not work.exists()


def test_other_settings_are_refused_and_overwrite_starts_over(uninterrupted, data_dir, tmp_path, capsys):
    whole, whole_out = uninterrupted
    out = tmp_path / "kept" / "compiled.json"
    with LocalOpenAIServer(research_handler()) as server:
        assert cli.main(command(data_dir, out, server.base_url, "--keep-partial")) == 0
        assert len(server.requests) == len(whole) and out.with_suffix(".partial").is_dir()
        capsys.readouterr()

        # every answer is in the kept folder: the same command again sends nothing and saves the same result
        assert cli.main(command(data_dir, out, server.base_url, "--keep-partial")) == 0
        assert len(server.requests) == len(whole)
        assert program_and_figures(out) == program_and_figures(whole_out)
        assert "resuming" in capsys.readouterr().err

        # other settings: one line naming the setting and --overwrite, before any request
        assert cli.main(command(data_dir, out, server.base_url, metric="recall")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--metric was 'f1', now 'recall'" in err[0] and "--overwrite" in err[0], err
        assert len(server.requests) == len(whole)

        # --overwrite discards the folder: every request again, and the folder goes once the program is saved
        assert cli.main(command(data_dir, out, server.base_url, "--overwrite")) == 0
        assert len(server.requests) == 2 * len(whole)
        assert "resuming" not in capsys.readouterr().err
    assert not out.with_suffix(".partial").exists()
    assert program_and_figures(out) == program_and_figures(whole_out)


def test_ctrl_c_says_how_to_resume_and_the_rerun_ends_as_an_uninterrupted_one(uninterrupted, data_dir, tmp_path):
    whole, whole_out = uninterrupted
    out = tmp_path / "ctrl-c" / "compiled.json"
    process: dict[str, subprocess.Popen] = {}
    scripted = research_handler()

    def interrupting(messages):
        if len(server.requests) == 9:
            process["p"].send_signal(signal.SIGINT)
        return scripted(messages)

    with LocalOpenAIServer(interrupting) as server:
        process["p"] = subprocess.Popen(
            [sys.executable, "-m", "deepresearch.cli", *command(data_dir, out, server.base_url)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        _, err = process["p"].communicate(timeout=300)
        first = len(server.requests)
        assert process["p"].returncode == 130, err[-2000:]
        assert f"rerun the same command to resume from {out.with_suffix('.partial')}" in err
        assert cli.main(command(data_dir, out, server.base_url)) == 0
        second = len(server.requests) - first
    assert first == 9  # Ctrl-C came with the 9th request: no 10th was sent

    def rest(answered: int) -> int:
        done = {key(r) for r in whole[:answered]}
        return sum(key(r) not in done for r in whole[answered:])

    # what the interrupted start was answered is not asked again (the 9th answer arrives as Ctrl-C does: kept
    # when its thread stored it before the process stopped, which is what happens here, 4 of 20 sent again)
    assert second in (rest(9), rest(8)) and second < len(whole) - 8
    assert program_and_figures(out) == program_and_figures(whole_out)


@pytest.mark.parametrize("optimizer", ["miprov2", "gepa"])
def test_the_optimizers_own_seeded_calls_resume_too(optimizer, data_dir, tmp_path, monkeypatch, capsys):
    # MIPROv2's proposer samples at temperature 1 with rollout ids drawn from the seed, GEPA reflects on
    # minibatches drawn from it: a rerun asks the very same requests, so the answered ones are replayed
    from tests.optimize.test_every_target import research_or_anything

    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    whole_out, out = tmp_path / "whole" / "compiled.json", tmp_path / "cut" / "compiled.json"
    with LocalOpenAIServer(research_or_anything()) as server:
        assert cli.main(command(data_dir, whole_out, server.base_url, optimizer=optimizer)) == 0
    whole = list(server.requests)
    marker = {"miprov2": "proposed_instruction", "gepa": "current_instruction"}[optimizer]
    own = [i for i, r in enumerate(whole) if marker in json.dumps(r)]  # the optimizer's own requests
    assert own, "the optimizer asked for no instruction"
    answered = own[-1] + 1  # interrupted just after its last own request was answered
    assert answered + 1 < len(whole)
    process: dict[str, subprocess.Popen] = {}
    scripted = research_or_anything()

    def killing(messages):
        if len(server.requests) == answered + 1:
            process["p"].send_signal(signal.SIGKILL)
        return scripted(messages)

    with LocalOpenAIServer(killing) as server:
        process["p"] = subprocess.Popen(
            [sys.executable, "-m", "deepresearch.cli", *command(data_dir, out, server.base_url, optimizer=optimizer)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        _, err = process["p"].communicate(timeout=300)
        assert process["p"].returncode == -signal.SIGKILL, err[-2000:]
        first = list(server.requests)
        assert [key(r) for r in first] == [key(r) for r in whole[: answered + 1]]
        assert cli.main(command(data_dir, out, server.base_url, optimizer=optimizer)) == 0
        second = server.requests[len(first) :]
    done = {key(r) for r in whole[:answered]}
    assert [key(r) for r in second] == [key(r) for r in whole[answered:] if key(r) not in done]
    assert program_and_figures(out) == program_and_figures(whole_out)
