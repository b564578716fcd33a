"""`deepresearch COMMAND --help` answers at once: building a command's parser loads no DSPy, LiteLLM, numpy or
torch (they are imported by the command's `main`), so help is as quick as `deepresearch --help`.

Each command is asked for its help in a fresh interpreter, where nothing was imported before; the plain lists
of names that --help quotes instead of importing them are checked against their sources here.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from deepresearch import cli

HEAVY = ("dspy", "litellm", "numpy", "torch")
PROBE = (
    """
import contextlib, io, json, sys
from deepresearch.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit_:
        code = exit_.code
print(json.dumps({"code": code, "help": out.getvalue(), "heavy": [m for m in HEAVY if m in sys.modules]}))
"""
).replace("HEAVY", repr(HEAVY))


def options(parser) -> list[str]:
    """Every option string of `parser` that --help shows (deprecated spellings are hidden from it)."""
    return [
        o
        for action in parser._actions
        for o in action.option_strings
        if action.help != "==SUPPRESS==" and o not in ("-h", "--help")
    ]


@pytest.mark.parametrize("prog, module, summary", cli.commands(), ids=lambda v: v if " " in str(v) else None)
def test_help_loads_nothing_heavy_and_lists_the_options(prog, module, summary):
    argv = prog.split()[1:] + ["--help"]
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["code"] == 0
    assert answer["heavy"] == [], f"{prog} --help imported {answer['heavy']}"
    parser = cli.command_parser(prog, importlib.import_module(module), summary)
    missing = [o for o in options(parser) if o not in answer["help"]]
    assert options(parser) and missing == [], f"{prog} --help leaves out {missing}"


def test_the_names_help_quotes_match_their_sources():
    from deepresearch.optimize.compile import OPTIMIZERS
    from deepresearch.optimize.names import OPTIMIZERS as OPTIMIZER_NAMES
    from deepresearch.programs.stages import names
    from deepresearch.programs.stages.registry import STAGES
    from deepresearch.retrievers.scoring import IDF
    from deepresearch.retrievers.settings import IDF_FORMS

    assert names.RESEARCH_STAGES == tuple(STAGES.research())
    assert names.GATHER_STAGES == tuple(STAGES.gather())
    assert names.RECORDED_STAGES == tuple(STAGES.recorded())
    assert sorted(IDF_FORMS) == sorted(IDF)
    assert OPTIMIZERS is OPTIMIZER_NAMES


def test_the_generated_reference_names_every_command_and_option():
    from pathlib import Path

    from deepresearch.cli.reference import MARKER, markdown, render

    reference = markdown()
    for prog, module, summary in cli.commands():
        assert f"`{prog}`" in reference, prog
        section = reference.split(f"`{prog}`\n", 1)[1].split("\n### ", 1)[0]
        parser = cli.command_parser(prog, importlib.import_module(module), summary)
        missing = [o for o in options(parser) if f"`{o}" not in section and f", {o}" not in section]
        assert missing == [], f"the reference of {prog} leaves out {missing}"
    page = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert MARKER in page and MARKER not in render(page) and reference in render(page)
