"""The command line's conventions: --version, -q/-v/-vv on every command, settings files, help for users."""

import json
import logging
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from deepresearch import cli
from deepresearch.programs.config import PRESETS
from deepresearch.retrievers.extras import install_hint

QUESTION = "Does obesity increase the risk of type 2 diabetes?"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Work in an empty folder (no deepresearch.toml), with no LM from the environment and a fresh root logger."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []  # logging.basicConfig only configures a root logger without handlers
    yield tmp_path
    root.handlers, root.level = handlers, level


def run(data_dir, out, *extra):
    return cli.main(
        [
            "run",
            QUESTION,
            "--corpus",
            str(data_dir / "scifact"),
            "--depth",
            "1",
            "--breadth",
            "2",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_version_prints_the_installed_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"deepresearch {version('dspy-deepresearch')}"
    done = subprocess.run(
        [sys.executable, "-m", "deepresearch.cli", "--version"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == f"deepresearch {version('dspy-deepresearch')}"


def test_help_is_for_users_and_names_every_preset(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "dispatcher" not in text and "add_arguments" not in text  # no developer docstring
    assert 'deepresearch run "' in text and "--corpus scifact" in text  # an example to copy
    for name in PRESETS:
        assert f"\n  {name} " in text, name
    assert "`standard` is the default" in text


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_adds_the_steps_and_quiet_removes_progress(where, in_tmp, data_dir, capsys):
    def stderr_of(flag, out):
        argv = [
            "run",
            QUESTION,
            "--corpus",
            str(data_dir / "scifact"),
            "--depth",
            "1",
            "--breadth",
            "2",
            "--out",
            str(out),
        ]
        argv = ([flag] + argv if where == "before" else argv + [flag]) if flag else argv
        logging.getLogger().handlers = []
        assert cli.main(argv) == 0
        return capsys.readouterr().err

    plain, verbose, quiet = stderr_of(None, in_tmp / "a"), stderr_of("-v", in_tmp / "b"), stderr_of("-q", in_tmp / "c")
    assert "node 1 done" in plain and "INFO" not in plain
    assert "INFO deepresearch.programs.runtime.progress: [" in verbose and "node_start 1" in verbose
    assert "node 1 done" not in quiet and "INFO" not in quiet


def test_commands_run_again_in_one_process_redact_each_log_record_once(in_tmp):
    # a notebook (or a test suite) calls the command line many times: every call must not stack another
    # redacting filter on the same handlers, each of which would scan every later record again
    handler = logging.StreamHandler()
    logging.getLogger().addHandler(handler)
    for _ in range(3):
        assert cli.main(["--version"]) == 0
    assert [type(f).__name__ for f in handler.filters] == ["RedactingFilter"]


def test_vv_logs_debug_on_a_subcommand(in_tmp, data_dir):
    argv = [
        sys.executable,
        "-m",
        "deepresearch.cli",
        "run",
        QUESTION,
        "--corpus",
        str(data_dir / "scifact"),
        "--depth",
        "1",
        "--breadth",
        "1",
        "--out",
        str(in_tmp / "o"),
    ]
    plain = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    debug = subprocess.run(argv + ["--overwrite", "-vv"], cwd=ROOT, capture_output=True, text=True)
    assert plain.returncode == debug.returncode == 0
    assert "DEBUG " not in plain.stderr and "DEBUG " in debug.stderr and "INFO " in debug.stderr


def test_a_settings_file_sets_run_options_and_the_command_line_wins(in_tmp, data_dir):
    (in_tmp / "deepresearch.toml").write_text(
        f'[run]\npreset = "quick"\ncorpus = "{data_dir / "scifact"}"\nhits_per_query = 4\nno-progress = true\n'
    )
    assert cli.main(["run", QUESTION, "--out", str(in_tmp / "a")]) == 0
    config = json.loads((in_tmp / "a" / "trace.json").read_text())["config"]
    assert (config["depth"], config["breadth"], config["hits_per_query"]) == (1, 2, 4)  # quick, and the file's hits
    assert cli.main(["run", QUESTION, "--out", str(in_tmp / "b"), "--hits", "6", "--preset", "standard"]) == 0
    config = json.loads((in_tmp / "b" / "trace.json").read_text())["config"]
    assert (config["depth"], config["breadth"], config["hits_per_query"]) == (2, 3, 6)


def test_config_option_reads_another_file_anywhere_on_the_line(in_tmp, data_dir):
    settings = in_tmp / "mine.toml"
    settings.write_text(f'quiet = true\n[run]\ndepth = 1\nbreadth = 1\ncorpus = "{data_dir / "scifact"}"\n')
    assert cli.main(["run", QUESTION, "--out", str(in_tmp / "o"), "--config", str(settings)]) == 0
    assert len(json.loads((in_tmp / "o" / "trace.json").read_text())["tree"]) == 1


@pytest.mark.parametrize(
    "text,message",
    [
        ('[run]\ndepth = "two"\n', "[run] key 'depth': Input should be a valid integer"),
        ("[run]\ndeph = 2\n", "[run] unknown key 'deph'; known: answer"),
        ('[run]\npreset = "huge"\n', "[run] key 'preset': Input should be"),
        ("verbose = 5\n", "key 'verbose': Input should be 0, 1 or 2"),
        ("color = true\n", "unknown key 'color'; known: quiet, verbose"),
        ("[rn]\ndepth = 1\n", "unknown table [rn]; tables are named after a command"),
        ("[run\n", "not valid TOML"),
    ],
)
def test_a_bad_settings_file_is_one_line_naming_the_file_and_key(text, message, in_tmp, capsys):
    (in_tmp / "deepresearch.toml").write_text(text)
    assert cli.main(["run", QUESTION]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(in_tmp / "deepresearch.toml") in err[0] and message in err[0], err


def test_a_missing_config_file_is_named(in_tmp, capsys):
    assert cli.main(["run", QUESTION, "--config", "nope.toml"]) == 2
    assert (
        capsys.readouterr().err.strip() == "deepresearch: error: --config nope.toml: no such file; pass the "
        "path of a TOML settings file"
    )


def test_an_eval_command_reads_its_own_table(in_tmp, capsys):
    (in_tmp / "deepresearch.toml").write_text("[eval.retrieval]\nnot_an_option = 1\n[run]\ndepth = 1\n")
    assert cli.main(["eval", "retrieval"]) == 2
    assert "[eval.retrieval] unknown key 'not_an_option'" in capsys.readouterr().err


def test_a_missing_extra_is_one_line(in_tmp, data_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # `import sentence_transformers` fails
    from deepresearch.retrievers import embed

    embed.load_encoder.cache_clear()
    code = run(data_dir, in_tmp / "o", "--retriever", "dense")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == (
        "deepresearch run: error: dense retrieval and sentence embeddings needs the "
        f"'dense' extra: {install_hint('dense')}"
    )


def test_the_documented_settings_example_runs_as_written(in_tmp, data_dir, monkeypatch, capsys):
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()  # the settings file's reference page
    example = page.split("```toml\n", 1)[1].split("```", 1)[0]
    (in_tmp / "deepresearch.toml").write_text(example)
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))  # corpus = "scifact" is looked up there
    logging.getLogger().handlers = []  # pytest's own handlers would make logging.basicConfig do nothing
    assert cli.main(["run", QUESTION, "--out", str(in_tmp / "o")]) == 0
    trace = json.loads((in_tmp / "o" / "trace.json").read_text())
    assert (trace["config"]["depth"], trace["config"]["breadth"], trace["config"]["max_lm_calls"]) == (1, 2, 200)
    assert "INFO deepresearch.programs.runtime.progress" in capsys.readouterr().err  # verbose = 1


def test_a_command_help_says_what_it_does_and_names_the_shared_options(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0
    assert "Research a question and write report.md and trace.json." in text
    assert "standard (the default, depth 2 x breadth 3)" in " ".join(text.split())
    assert "--config FILE" in text and "-v/-vv" in text
