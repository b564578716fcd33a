import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deepresearch import cli
from deepresearch.programs.runtime.outputs import RUN_FILES

QUESTION = "Does vitamin D supplementation reduce fracture risk?"


def test_run_offline_writes_report_and_trace(tmp_path, data_dir, monkeypatch, capsys):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    out = tmp_path / "vitd"
    code = cli.main(
        [
            "run",
            QUESTION,
            "--corpus",
            str(data_dir / "scifact"),
            "--depth",
            "2",
            "--breadth",
            "2",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0
    printed = capsys.readouterr()
    assert "offline extractive baseline" in printed.err and printed.err.count("offline") == 1
    assert f"report: {out / 'report.md'}" in printed.out and "searches 4" in printed.out
    report = (out / "report.md").read_text()
    trace = json.loads((out / "trace.json").read_text())
    assert report == trace["markdown"] and "## References" in report
    assert trace["status"] == "done" and trace["stats"]["searches"] == 4 and len(trace["tree"]) == 2
    assert trace["models"] == {"default": "offline"} and trace["config"]["depth"] == 2
    node = trace["tree"][0]
    assert {"query", "goal", "retrieved_ids", "relevant_ids", "learnings", "children", "status", "error"} <= set(node)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", " ", "--corpus", "scifact"], "question is empty"),
        (["run", QUESTION, "--corpus", "/no/such/corpus.jsonl"], "corpus not found"),
        (["run", QUESTION, "--corpus", "scifact", "--depth", "0"], "--depth must be >= 1, got 0"),
        (["run", QUESTION, "--corpus", "scifact", "--lm", "nosuchprovider/model"], "unknown LM provider"),
        (["run", QUESTION, "--corpus", "scifact", "--lm", "openai/gpt-4.1-mini"], "needs OPENAI_API_KEY"),
        (["run", QUESTION, "--corpus", "scifact", "--stage-lm", "judge=openai/x"], "--stage-lm"),
        (["nosuchcommand"], "unknown command"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line or "unknown" in line]
    assert len(err) == 1 and message in err[0]


def test_a_bad_corpus_line_is_named(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "1", "title": "A", "text": "ok"}\n{"_id": "2", "title": \n')
    assert cli.main(["run", QUESTION, "--corpus", str(corpus), "--out", str(tmp_path / "o")]) == 2
    assert f"{corpus}:2" in capsys.readouterr().err


def run_into(out, data_dir, *extra, question=QUESTION):
    return cli.main(
        [
            "run",
            question,
            "--corpus",
            str(data_dir / "scifact"),
            "--depth",
            "1",
            "--breadth",
            "1",
            "--out",
            str(out),
            *extra,
        ]
    )


def contents(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name in RUN_FILES}


def error_lines(err):
    return [line for line in err.splitlines() if "error" in line]


# holds the lock of the folder named by its argument until its stdin closes, as a run in progress would
HOLD_LOCK = """import sys
from deepresearch.programs.runtime.outputs import out_folder_lock
with out_folder_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_second_run_into_the_same_folder_stops_at_once(tmp_path, data_dir, capsys):
    out = tmp_path / "vitd"
    assert run_into(out, data_dir, "-q") == 0
    assert json.loads((out / "run.json").read_text())["status"] == "done"
    first = contents(out)
    capsys.readouterr()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(cli.__file__).parent,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run_into(out, data_dir, "-q") == 2
    finally:
        holder.communicate("")
    err = error_lines(capsys.readouterr().err)
    assert len(err) == 1 and f"another run is writing to {out} (pid {holder.pid})" in err[0]
    assert contents(out) == first  # the first run's files are untouched


def test_a_folder_of_another_question_is_refused_unless_overwrite(tmp_path, data_dir, capsys):
    out = tmp_path / "shared"
    assert run_into(out, data_dir, "-q") == 0
    (out / "notes.txt").write_text("mine")
    first = contents(out)
    capsys.readouterr()
    other = "Does exercise improve sleep quality?"
    assert run_into(out, data_dir, "-q", question=other) == 2
    err = error_lines(capsys.readouterr().err)
    assert len(err) == 1 and "holds another question" in err[0] and "--overwrite" in err[0]
    assert contents(out) == first
    assert run_into(out, data_dir, "-q", "--overwrite", question=other) == 0
    assert json.loads((out / "trace.json").read_text())["question"] == other
    assert json.loads((out / "run.json").read_text())["question"] == other
    assert (out / "notes.txt").read_text() == "mine"  # --overwrite removes the run's files, nothing else
    assert run_into(out, data_dir, "-q", question=other) == 0  # the same question again: allowed


@pytest.mark.parametrize(
    "flags,shows_progress",
    [
        ([], True),
        (["-q"], False),
        (["--quiet"], False),
        (["--no-progress"], False),
    ],
)
def test_progress_lines_unless_quiet(flags, shows_progress, tmp_path, data_dir, capsys):
    assert run_into(tmp_path / "out", data_dir, *flags) == 0
    err = capsys.readouterr().err.splitlines()  # captured stderr is not a terminal: plain lines, no bar
    nodes = [line for line in err if re.match(r"\[\d+\.\ds\] node 1 done · \d+ hits · ", line)]
    ends = [line for line in err if re.match(r"\[\d+\.\ds\] run done · 1 nodes · 1 searches", line)]
    assert (len(nodes), len(ends)) == ((1, 1) if shows_progress else (0, 0))


def test_quiet_verbose_and_config_are_taken_anywhere_before_a_double_dash():
    assert cli._take_global_options(["-q", "run", "q", "--verbose", "-vv", "--config", "a.toml", "--", "-v"]) == (
        3,
        True,
        "a.toml",
        ["run", "q", "--", "-v"],
    )
    assert cli._take_global_options(["run", "q", "--config=b.toml"]) == (0, False, "b.toml", ["run", "q"])
    assert cli._take_global_options(["run", "q"]) == (0, False, None, ["run", "q"])


@pytest.mark.usefixtures("clean_lm_env")
def test_stage_lm_offline_runs_that_stage_offline_and_the_lm_the_rest(tmp_path):
    from deepresearch.signatures.plan import PlanQueries
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    out = tmp_path / "r"
    with LocalOpenAIServer(research_handler()) as server:
        args = ["run", "Does vitamin D supplementation reduce fracture risk?", "--corpus", "scifact"]
        args += ["--depth", "1", "--breadth", "2", "-q", "--out", str(out), "--no-cache"]
        args += ["--lm", "openai/local", "--api-base", server.base_url, "--stage-lm", "plan=offline"]
        assert cli.main(args) == 0
    sent = [r["messages"][0]["content"] for r in server.requests]
    assert sent and not any(PlanQueries.instructions.splitlines()[0] in s for s in sent)  # no plan request
    trace = json.loads((out / "trace.json").read_text())
    assert trace["status"] == "done" and trace["models"]["plan"] == "offline"
    assert "plan" not in trace["usage"] and trace["usage"]["extract"]["calls"] == 2
