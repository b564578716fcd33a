"""What a new user meets first (issue 28, item 4): `import deepresearch as dr` and its names, a `--help`
that imports nothing heavy, `run --help` in groups, one-line errors that suggest the option meant, and
a run whose last line states its tokens and cost, or that it ran offline. (How fast `--help` answers is
measured in benchmarks/bench_cli.py, not here.)"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import subprocess
import sys

import pytest

import deepresearch as dr
from deepresearch import cli
from deepresearch.cli import run as run_cli

QUESTION = "Does vitamin D supplementation reduce fracture risk?"
HEAVY = ("dspy", "litellm", "numpy", "pydantic", "torch", "openai")


def imported_after(code: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport sys, json; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_deepresearch_loads_nothing_heavy():
    assert not imported_after("import deepresearch") & set(HEAVY)


def test_help_imports_nothing_heavy():
    code = (
        "import contextlib, io\nfrom deepresearch import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out: assert cli.main(['--help']) == 0\n"
        "assert 'run' in out.getvalue()"
    )
    assert not imported_after(code) & set(HEAVY)


def test_the_first_names_are_at_the_top_documented_and_work(data_dir):
    assert {
        "DeepResearch",
        "ResearchConfig",
        "preset",
        "open_corpus",
        "load_corpus",
        "open_retriever",
        "BM25Retriever",
        "DenseRetriever",
        "HybridRetriever",
        "build_index",
        "open_index",
        "compile_program",
        "save_compiled",
        "load_compiled",
        "Gatherer",
        "examples",
        "metrics",
        "choose_twins",
    } <= set(dr.__all__)
    assert set(dir(dr)) == set(dr.__all__)  # only the public API: no Any, TYPE_CHECKING or importlib
    for name in dr.__all__:
        value = getattr(dr, name)
        assert value.__module__.startswith("deepresearch.") if hasattr(value, "__module__") else True
        if callable(value):
            assert (inspect.getdoc(value) or "").strip(), f"dr.{name} has no docstring"
    from deepresearch.programs.research.program import DeepResearch

    assert dr.DeepResearch is DeepResearch
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        dr.NoSuchThing  # noqa: B018
    # the module docstring's example, on the test data: an offline report with references
    retrieval = dr.open_retriever(str(data_dir / "scifact"))
    program = dr.DeepResearch(retriever=retrieval.retriever, depth=1, breadth=2, offline=True)
    report = program(question="Does obesity increase the risk of type 2 diabetes?").report
    assert isinstance(report, dr.Report) and report.status == "done" and report.references


def run_parser() -> argparse.ArgumentParser:
    parser = cli.Parser(prog="deepresearch run")
    run_cli.add_arguments(parser)
    return parser


def test_run_help_is_grouped_everyday_first(capsys):
    parser = run_parser()
    groups = [(g.title, [a.dest for a in g._group_actions]) for g in parser._action_groups if g._group_actions]
    titles = [title for title, _ in groups]
    assert titles == ["options", "everyday options", "retrieval", "language model", "budgets", "output"], titles
    everyday = dict(groups)["everyday options"]
    assert everyday[:3] == ["question", "corpus", "lm"] and {"preset", "depth", "breadth", "out"} <= set(everyday)
    assert {"deadline", "max_lm_calls", "max_tokens"} <= set(dict(groups)["budgets"])
    assert {"k1", "b", "tokenizer", "index"} <= set(dict(groups)["retrieval"])
    assert {"answer", "bibtex", "overwrite", "resume"} <= set(dict(groups)["output"])
    undocumented = [a.dest for a in parser._actions if not a.help]
    assert undocumented == [], undocumented  # --temperature had none
    help_text = parser.format_help()
    assert help_text.index("everyday options:") < help_text.index("retrieval:") < help_text.index("budgets:")
    assert help_text.splitlines()[0].startswith("usage: deepresearch run QUESTION")


@pytest.mark.parametrize(
    "argv, meant",
    [
        (["run", QUESTION, "--depht", "3"], "--depth"),
        (["run", QUESTION, "--bibtx"], "--bibtex"),
        (["run", QUESTION, "--max-lm-cals=3"], "--max-lm-calls"),
        (["index", "scifact", "--out", "x", "--dnese", "m"], "--dense-model"),
    ],
)
def test_a_mistyped_option_gives_one_line_naming_the_nearest(argv, meant, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "unrecognized arguments" in err[0] and f"did you mean {meant}?" in err[0]


def test_an_unknown_option_with_nothing_near_names_no_option(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", QUESTION, "--zzzzzz"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "did you mean" not in line and "--help lists the options" in line


def test_a_mistyped_command_is_suggested(capsys):
    assert cli.main(["rnu", QUESTION]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "unknown command 'rnu'; did you mean run?" in line


def test_an_offline_run_ends_saying_it_ran_offline(tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    assert (
        cli.main(
            [
                "run",
                QUESTION,
                "--corpus",
                str(data_dir / "scifact"),
                "--depth",
                "1",
                "--breadth",
                "1",
                "--out",
                str(tmp_path / "o"),
                "-q",
            ]
        )
        == 0
    )
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("offline: no LM, no tokens, no cost") and "searches 1" in last


@pytest.mark.parametrize(
    "model, cost",
    [
        ("openai/gpt-4o-mini", r"cost \$\d+\.\d{4}"),  # priced by LiteLLM's (local) price map
        ("openai/local-model", r"cost unknown \(no price for the model\)"),
    ],
)
def test_a_run_with_an_lm_ends_with_its_tokens_and_cost(model, cost, tmp_path, data_dir, capsys):
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    with LocalOpenAIServer(research_handler()) as server:
        code = cli.main(
            [
                "run",
                QUESTION,
                "--corpus",
                str(data_dir / "scifact"),
                "--depth",
                "1",
                "--breadth",
                "1",
                "--lm",
                model,
                "--api-base",
                server.base_url,
                "--no-cache",
                "--out",
                str(tmp_path / "o"),
                "-q",
            ]
        )
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    calls, tokens = trace["stats"]["lm_calls"], trace["stats"]["tokens"]
    assert calls > 0 and tokens > 0
    assert re.search(rf"LM requests {calls} · tokens {tokens:,} · {cost}$", last), last


def test_a_failed_run_ends_with_its_cost_too(tmp_path, data_dir, capsys):
    """Exit 3 with the error on stderr, and still the summary as the last line on stdout."""
    from tests.integration.openai_server import Error, LocalOpenAIServer

    with LocalOpenAIServer(lambda messages: Error(401, "Incorrect API key provided")) as server:
        code = cli.main(
            [
                "run",
                QUESTION,
                "--corpus",
                str(data_dir / "scifact"),
                "--depth",
                "1",
                "--breadth",
                "1",
                "--lm",
                "openai/local",
                "--api-base",
                server.base_url,
                "--no-preflight",
                "--no-cache",
                "--out",
                str(tmp_path / "o"),
                "-q",
            ]
        )
    assert code == 3
    printed = capsys.readouterr()
    assert "error: " in printed.err
    last = printed.out.strip().splitlines()[-1]
    # no reply came back, so nothing was billed: $0 (a model without a price would say "cost unknown")
    assert re.search(rf"LM requests {len(server.requests)} · tokens 0 · cost (\$0\.0000|unknown .*)$", last), last
