"""One CLI vocabulary (issue 31, item 5): every command's parser, walked from the dispatcher's table, spells
each concept the one way `VOCABULARY` names; the old spellings still parse for one release and say once
which spelling to use; the global -q silences every command's progress."""

from __future__ import annotations

import argparse
import importlib
import re
from collections import defaultdict

import pytest

from deepresearch import cli
from deepresearch.cli.options import VOCABULARY


def commands(table=cli.COMMANDS, prefix=()):
    for name, entry in table.items():
        if isinstance(entry, dict):
            yield from commands(entry, (*prefix, name))
        else:
            yield " ".join((*prefix, name)), entry[0]


def parser_of(command: str) -> cli.Parser:
    module = dict(commands())[command]
    parser = cli.Parser(prog=f"deepresearch {command}")
    importlib.import_module(module).add_arguments(parser)
    return parser


def options(parser: argparse.ArgumentParser, *, hidden: bool) -> list[argparse.Action]:
    """The parser's options that --help shows (hidden=False) or its deprecated aliases (hidden=True)."""
    return [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction) and (a.help == argparse.SUPPRESS) == hidden
    ]


ALL = [name for name, _ in commands()]
CANONICAL = {canonical for canonical, _ in VOCABULARY.values()}
FORBIDDEN = {old: canonical for canonical, olds in VOCABULARY.values() for old in olds}


def test_the_walk_reaches_every_command():
    assert {
        "run",
        "batch",
        "optimize",
        "view",
        "index",
        "eval retrieval",
        "eval reports",
        "eval report",
        "eval gather",
        "eval taxonomy",
        "eval taxonomy-score",
    } <= set(ALL)


@pytest.mark.parametrize("command", ALL)
def test_no_command_shows_a_synonym_of_a_canonical_spelling(command):
    shown = {o for a in options(parser_of(command), hidden=False) for o in a.option_strings}
    assert not {o: FORBIDDEN[o] for o in shown if o in FORBIDDEN}, f"{command} shows old spellings"


def test_one_spelling_names_one_option_and_one_option_one_spelling_across_commands():
    by_spelling, by_dest = defaultdict(set), defaultdict(set)
    for command in ALL:
        for action in options(parser_of(command), hidden=False):
            for spelling in action.option_strings:
                by_spelling[spelling].add(action.dest)
            by_dest[action.dest].add(tuple(action.option_strings))
    assert {s: d for s, d in by_spelling.items() if len(d) > 1} == {}
    assert {d: s for d, s in by_dest.items() if len(s) > 1} == {}


def test_depth_is_the_tree_depth_wherever_it_is_shown():
    having = [c for c in ALL if any("--depth" in a.option_strings for a in options(parser_of(c), hidden=False))]
    assert set(having) == {"run", "optimize", "eval report", "eval taxonomy"}
    for command in having:
        depth = next(a for a in options(parser_of(command), hidden=False) if "--depth" in a.option_strings)
        assert depth.type is int and re.search(r"depth|levels", depth.help), command
    retrieval = {o for a in options(parser_of("eval retrieval"), hidden=False) for o in a.option_strings}
    assert "--hits" in retrieval and "--depth" not in retrieval


def test_every_deprecated_alias_is_a_listed_synonym_and_hidden_from_help(capsys):
    seen = set()
    for command in ALL:
        parser = parser_of(command)
        for action in options(parser, hidden=True):
            [old] = action.option_strings
            seen.add(old)
            assert old in FORBIDDEN or command == "eval retrieval", (command, old)  # its --depth, --no-dense
            assert action.replacement.split()[0] in CANONICAL | {"--retriever"}, (command, old)
        parser.print_help()
        assert not re.search(
            r"--(restart|queries|questions|train|threads|concurrency|no-progress)\b", capsys.readouterr().out
        ), command
    assert {
        "--restart",
        "--queries",
        "--questions",
        "--train",
        "--threads",
        "--concurrency",
        "--no-progress",
        "--dense",
        "--depth",
        "--no-dense",
    } <= seen


# command, the old spelling's argv, the option it sets, the value, the spelling to use
DEPRECATED = [
    ("run", ["q", "--concurrency", "3"], "workers", 3, "--workers"),
    ("run", ["q", "--no-progress"], "quiet", True, "-q"),
    ("optimize", ["--train", "scifact"], "data", "scifact", "--data"),
    ("optimize", ["--threads", "2"], "workers", 2, "--workers"),
    ("eval report", ["--questions", "qs.jsonl"], "data", "qs.jsonl", "--data"),
    ("eval gather", ["--queries", "scifact"], "data", "scifact", "--data"),
    ("eval gather", ["--data", "scifact", "--restart"], "overwrite", True, "--overwrite"),
    ("eval gather", ["--data", "scifact", "--no-progress"], "quiet", True, "-q"),
    ("eval taxonomy", ["--restart"], "overwrite", True, "--overwrite"),
    ("eval retrieval", ["--depth", "50"], "hits", 50, "--hits"),
    ("eval retrieval", ["--no-dense"], "retriever", "bm25", "--retriever bm25"),
    (
        "index",
        ["scifact", "--out", "idx", "--dense", "all-MiniLM-L6-v2"],
        "dense_model",
        "all-MiniLM-L6-v2",
        "--dense-model",
    ),
]


@pytest.mark.parametrize("command, argv, dest, value, new", DEPRECATED)
def test_an_old_spelling_still_parses_and_warns_once(command, argv, dest, value, new, capsys):
    parser = parser_of(command)
    old = next(a for a in argv if a.startswith("--") and a not in ("--data", "--out"))
    args = parser.parse_args(
        [*argv, *argv[argv.index(old) :]] if old in ("--restart", "--no-progress", "--no-dense") else argv
    )  # a flag given twice still warns once
    assert getattr(args, dest) == value
    assert capsys.readouterr().err.splitlines() == [f"deepresearch {command}: {old} is deprecated; use {new}"]


def test_the_canonical_spelling_parses_the_same_without_a_warning(capsys):
    assert parser_of("eval retrieval").parse_args(["--hits", "50"]).hits == 50
    assert parser_of("optimize").parse_args(["--data", "scifact", "--workers", "2"]).workers == 2
    assert capsys.readouterr().err == ""


def test_a_settings_file_may_still_use_an_old_key(tmp_path, monkeypatch):
    from deepresearch.programs.formats.config_file import command_defaults, read_config

    path = tmp_path / "deepresearch.toml"
    path.write_text('[run]\nconcurrency = 2\n[eval.gather]\nrestart = true\nqueries = "scifact"\n')
    settings = read_config(path)
    assert command_defaults(settings, path, "run", parser_of("run")) == {"workers": 2}
    assert command_defaults(settings, path, "eval gather", parser_of("eval gather")) == {
        "overwrite": True,
        "data": "scifact",
    }


@pytest.mark.parametrize("how", ["", "-q", "--no-progress", "settings"])
def test_quiet_silences_the_gather_bar(how, data_dir, tmp_path, capsys):
    settings = tmp_path / "settings.toml"
    settings.write_text("[eval.gather]\nno_progress = true\n")  # the old key, in a settings file
    flags = {"": [], "-q": ["-q"], "--no-progress": ["--no-progress"], "settings": ["--config", str(settings)]}
    argv = [
        "eval",
        "gather",
        "--data",
        str(data_dir / "scifact"),
        "--lm",
        "offline",
        "--method",
        "raw",
        "--limit",
        "2",
        "--bootstrap",
        "10",
        "--out",
        str(tmp_path / "out"),
        *flags[how],
    ]
    assert cli.main(argv) == 0
    bar = re.compile(r"raw: +\d+%\|")  # tqdm's bar, drawn on stderr
    assert bool(bar.search(capsys.readouterr().err)) is (how == "")


@pytest.mark.parametrize("quiet", [False, True])
def test_quiet_silences_the_taxonomy_progress_lines(quiet, data_dir, tmp_path, capsys):
    argv = [
        "eval",
        "taxonomy",
        "--data",
        str(data_dir / "taxobench_examples"),
        "--lm",
        "offline",
        "--sim",
        "exact",
        "--limit",
        "1",
        "--out",
        str(tmp_path / "out"),
        *(["-q"] if quiet else []),
    ]
    assert cli.main(argv) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if re.match(r"survey \d+: \d+ papers", x)]
    assert len(lines) == (0 if quiet else 1)
