"""The README and the documentation site, true end to end (issue 19, item 6; issue 28, item 3).

Every shell command in the code blocks of README.md and of the site's pages (docs/, in the order of
mkdocs.yml's navigation) is read by the real command-line parser exactly as written. The commands that
need no hosted model, no network and no outside server also run, as written, in a folder laid out like a
checkout with the benchmark data downloaded to `data/`; the rest are named below with the reason. The
README's Python example runs and gives what the text around it promises. A README or a page that drifts
from the code fails here. (The TOML example of docs/reference/cli.md runs in tests/test_cli_conventions.py;
`make demo` and `make test` are CI's own steps.)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import itertools
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from deepresearch import cli
from tests.conftest import data_root
from tests.notebook_views import shown

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PLACEHOLDER = "<!-- placeholder: replaced at merge -->"  # a page another change writes; it has no commands
BIN = Path(sys.executable).parent  # the environment's `deepresearch` console script sits beside its python

HOSTED = "needs a hosted model and its API key"
LLAMA = "needs a llama.cpp server on port 8080"
# Every README or page command that is not run here, and why. A command missing from this table is run, so a
# new command cannot pass unchecked; an entry no document has any more fails test_the_lists_match_the_readme.
NOT_RUN: dict[str, str] = {
    "make demo": "CI runs it",
    "make test": "CI runs it",
    "make lint": "make test runs it first; `make -n` checks the target",
    "python -m build": "builds the wheel; tests/test_packaging.py builds and installs one",
    "make bench": "the benchmark suites take many minutes; `make -n` checks the target",
    'deepresearch run "Does vitamin D supplementation reduce fracture risk?" --lm openai/gpt-4.1-mini --depth 2 '
    "--breadth 3": HOSTED,
    'deepresearch run "Does vitamin D supplementation reduce fracture risk?" --corpus scifact --lm '
    "openai/gpt-4.1-mini": HOSTED,
    'deepresearch run "..." --lm ollama_chat/qwen2.5:7b': "needs an Ollama server",
    'deepresearch run "..." --lm openai/local --api-base http://127.0.0.1:8080/v1': LLAMA,
    'deepresearch run "..." --lm openai/Qwen/Qwen2.5-7B-Instruct --api-base http://127.0.0.1:8000/v1': "needs a vLLM server on port 8000",
    'deepresearch run "..." --corpus scifact --lm openai/local --api-base http://127.0.0.1:8080/v1': LLAMA,
    'deepresearch run "..." --corpus scifact --lm openai/local --api-base http://127.0.0.1:8080/v1 --stage-lm plan=offline': LLAMA,
    'deepresearch run "..." --corpus scifact --lm openai/Qwen/Qwen2.5-7B-Instruct --api-base '
    "http://127.0.0.1:8000/v1": "needs a vLLM server on port 8000",
    'deepresearch run "..." --corpus scifact --lm ollama_chat/qwen2.5:7b': "needs an Ollama server",
    'deepresearch run "..." --corpus scifact --lm openai/gpt-4.1-mini --stage-lm write=openai/gpt-4.1': HOSTED,
    'deepresearch run "What limits the efficiency of perovskite solar cells?" --corpus ~/papers/': "needs the reader's own folder of papers",
    'deepresearch run "..." --corpus refs.bib': "needs the reader's own refs.bib",
    'deepresearch run "..." --source openalex --full-text --lm openai/gpt-4.1-mini': "needs the network",
    "deepresearch index scifact --out idx/scifact --dense-model all-MiniLM-L6-v2": "slow: encoding SciFact's 5,183 abstracts takes over ten minutes on 2 cores",
    'deepresearch run "..." --index idx/scifact --retriever hybrid --lm openai/gpt-4.1-mini --taxonomy --bibtex': HOSTED,
    'deepresearch run "..." --source openalex --source arxiv --lm openai/gpt-4.1-mini': "needs the network",
    'deepresearch run "..." --corpus refs.bib --source s2 --source pubmed': "needs the network, and the reader's own refs.bib",
    "deepresearch optimize --program research --stage assess --metric f1 --optimizer gepa --data scifact "
    "--lm openai/gpt-4.1-mini --budget 200 --out compiled.json": HOSTED,
    'deepresearch run "..." --lm openai/gpt-4.1-mini --program compiled.json': HOSTED,
    'deepresearch run "..." --corpus scifact --lm openai/gpt-4.1-mini --program compiled.json': HOSTED,
    "deepresearch optimize --show compiled.json": "needs the compiled.json that an optimize run with a model writes",
    'deepresearch run "Does vitamin D reduce fracture risk?" --program compiled.json --lm openai/gpt-4.1-mini': HOSTED,
    "deepresearch eval gather --data scifact --program compiled.json --lm openai/gpt-4.1-mini": HOSTED,
    'deepresearch run "$q" --corpus scifact --lm openai/gpt-4.1-mini --out "runs/pool/$(echo $q | md5sum | '
    'cut -c1-8)"': HOSTED,
    "deepresearch optimize --stage writer --from-runs runs/pool --metric quality --optimizer gepa --lm "
    "openai/gpt-4.1-mini --judge-lm openai/gpt-4.1 --budget 60 --out writer.json": HOSTED,
    "deepresearch eval gather --data scifact --qrels test --lm openai/local --api-base http://127.0.0.1:8080/v1 "
    "--structured schema --limit 10 --iterations 2": LLAMA,  # docs/how-to/deploy.md
    'deepresearch run "Does vitamin D prevent fractures?" --corpus scifact --lm openai/qwen2.5-7b --lm-server '
    '"http://gpu1:8000/v1 max_parallel=8" --lm-server "http://gpu2:8000/v1 max_parallel=8 rpm=600"': "needs two model servers (gpu1, gpu2)",
    "deepresearch batch questions.jsonl --out runs/ --workers 2 -- --corpus scifact --preset quick --lm "
    "openai/gpt-4.1-mini": HOSTED,
    "deepresearch batch questions.jsonl --out runs/ --ray auto -- --corpus scifact --lm openai/qwen2.5-7b "
    '--lm-server "http://gpu1:8000/v1 max_parallel=8"': "needs a Ray cluster and a model server",
    'deepresearch run "Does vitamin D prevent fractures?" --corpus scifact --qdrant-url http://127.0.0.1:6333 '
    "--qdrant-mode bm25": "needs a Qdrant server",
    "deepresearch eval gather --data scifact --lm openai/qwen2.5-7b --api-base http://gpu1:8000/v1 --ray auto": "needs a Ray cluster and a model server",
    "deepresearch optimize --data scifact --metric recall --out compiled.json --lm openai/qwen2.5-7b --api-base "
    "http://gpu1:8000/v1 --ray auto": "needs a Ray cluster and a model server",
    "deepresearch index hf:BeIR/nfcorpus --out idx/nfcorpus": "needs the network (a Hugging Face hub dataset)",
    "deepresearch index hf:owner/papers --hf-config abstracts --split train --field doc_id=paper_id --field "
    "text=abstract --out idx/papers": "needs the network (a Hugging Face hub dataset; owner/papers is an example)",
    "deepresearch mcp --out runs/mcp --lm openai/gpt-4.1-mini": HOSTED,  # docs/how-to/mcp.md; tests/test_mcp.py serves
}
# Lines of the shell blocks that are not our commands: other programs, and the shell's loop words.
NOT_OURS: dict[str, str] = {
    "llama-server -m model.gguf --port 8080 -c 8192 &": "starts llama.cpp's server",
    "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000 &": "starts vLLM's server",
    "ollama serve & ollama pull qwen2.5:7b": "starts Ollama and downloads a model",
    "export OPENAI_API_KEY=sk-...": "sets the provider's key",
    "source .venv/bin/activate": "activates the environment `make demo` made",
    "pip install -e '.[docs]'": "installs the site's tools",
    "pip install -e '.[mcp]'": "installs the MCP SDK",
    "pip install build": "installs the wheel builder",
    "pip install dist/*.whl": "installs the wheel (tests/test_packaging.py installs one and runs it)",
    "mkdocs serve": "serves the site",
    'for q in "Does obesity increase the risk of type 2 diabetes?" "How does aspirin affect cancer risk?"; do': "the shell loop around a hosted run",
    "done": "the shell loop around a hosted run",
}
# Benchmark suites (`python -m benchmarks NAME`, `python -m benchmarks.bench_NAME --flag`) take minutes to
# hours: they are not run here; test_every_benchmark_command_names_a_suite checks the suite and its flags.
BENCHMARK = "python -m benchmarks"
# What `run` writes besides report.md and trace.json, as the README's comments say: the flag and the label
# of the line that names the file (`answer: runs/does-x-cause-y/answer.md`).
PROMISED = {"--answer": "answer", "--taxonomy": "taxonomy", "--bibtex": "bibtex"}
FIRST_WORDS = {"deepresearch", "make", "python", *(line.split()[0] for line in NOT_OURS)}
RUN_TIMEOUT_S = 900


# -- reading the README --------------------------------------------------------------------------------


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a # that starts a word outside quotes), trimmed."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip()
    return line.strip()


def normal(command: str) -> str:
    return " ".join(command.split())


def shell_commands(text: str) -> list[str]:
    """Every command line of the shell blocks (```bash, or unlabelled ones that hold commands), in order,
    continuation lines joined and comments removed. Fails on a line that starts with no known command."""
    commands = []
    for lang, body in code_blocks(text):
        if lang not in ("bash", "sh", ""):
            continue
        lines = [normal(strip_comment(line)) for line in re.sub(r"\\\n", " ", body).splitlines()]
        lines = [line for line in lines if line]
        if lang == "" and not any(line.split()[0] in FIRST_WORDS for line in lines):
            continue  # a picture (the layout tree), not commands
        for line in lines:
            assert line.split()[0] in FIRST_WORDS, f"README shell line starts with no known command: {line!r}"
            commands.append(line)
    return commands


def variants(command: str) -> list[str]:
    """The forms of a synopsis line: each `[--opt VALUE]` left out or given, each `a|b|c` value in turn.

    `deepresearch run "..." --index idx/scifact [--retriever bm25|dense|hybrid|qdrant]` stands for six
    commands; the first form (every optional part left out) is the one that runs."""
    groups = re.findall(r"\[([^\[\]]+)\]", command)
    choices = []
    for group in groups:
        head, _, values = group.rpartition(" ")
        given = [f"{head} {v}" for v in values.split("|")] if head and "|" in values else [group]
        choices.append(["", *given])
    forms = []
    for picked in itertools.product(*choices):
        parts = iter(picked)
        forms.append(normal(re.sub(r"\[([^\[\]]+)\]", lambda _, parts=parts: next(parts), command)))
    return forms


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


class _Loader(yaml.SafeLoader):
    """Reads mkdocs.yml, whose Python tags are not needed here."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def site_pages() -> list[Path]:
    """The site's pages in the order of its navigation, placeholders left out."""

    def walk(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from walk(value) if isinstance(value, list) else [value]

    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)["nav"]
    pages = [ROOT / "docs" / name for name in walk(nav)]
    return [p for p in pages if not p.read_text(encoding="utf-8").startswith(PLACEHOLDER)]


def all_text() -> str:
    """The README, then every page of the site, in order: the documents whose commands are checked."""
    return "\n".join([readme_text(), *(p.read_text(encoding="utf-8") for p in site_pages())])


COMMANDS = list(dict.fromkeys(shell_commands(all_text())))  # a command two documents show is checked once
OURS = [c for c in COMMANDS if c not in NOT_OURS]
BENCHMARKS = [c for c in OURS if c.startswith(BENCHMARK)]
DEEPRESEARCH = [c for c in OURS if c.split()[0] == "deepresearch"]
TO_RUN = [c for c in OURS if c not in NOT_RUN and c not in BENCHMARKS]


# -- the real parser, without running ------------------------------------------------------------------


class ParseError(Exception):
    """The command line `deepresearch` would refuse, with the message it would print."""


def parse(argv: list[str]) -> argparse.Namespace:
    """The namespace `deepresearch argv` hands its subcommand, read the way cli.main reads it (global
    options, the command table, the subcommand module's own parser) but stopping before the command runs."""
    _, _, _, rest = cli._take_global_options(argv)
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        resolved = cli._resolve(rest, "deepresearch", cli.COMMANDS)
        if isinstance(resolved, int):
            raise ParseError(said.getvalue().strip() or f"no command in {argv}")
        prog, module_name, rest, _ = resolved
        parser = cli.Parser(prog=prog)  # the command's real parser, with its one-line errors
        importlib.import_module(module_name).add_arguments(parser)
        try:
            return parser.parse_args(rest)
        except SystemExit:
            raise ParseError(said.getvalue().strip()) from None


def parse_line(command: str) -> argparse.Namespace:
    words = shlex.split(command)
    assert words[0] == "deepresearch", command
    return parse(words[1:])


@pytest.mark.parametrize("command", DEEPRESEARCH)
def test_every_deepresearch_command_parses_as_written(command):
    for form in variants(command):
        try:
            parse_line(form)
        except ParseError as err:
            pytest.fail(f"README command does not parse: {form}\n{err}")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "...", "--corpus", "scifact", "--answers"], "unrecognized arguments: --answers"),
        (["run", "...", "--corpus", "scifact", "--preset", "huge"], "invalid choice: 'huge'"),
        (["eval", "retrieve", "--corpus", "scifact"], "unknown command 'retrieve'"),
        (["search", "..."], "unknown command 'search'"),
        (["index", "--out", "idx/scifact"], "the following arguments are required"),
        (["eval", "taxonomy", "--data", "x", "--mode", "sideways"], "invalid choice: 'sideways'"),
    ],
)
def test_the_parser_refuses_a_made_up_command(argv, says):
    with pytest.raises(ParseError, match=re.escape(says)):
        parse(argv)


def test_a_readme_that_drifts_fails_the_parse():
    """The same extraction over documents with a renamed flag or a removed subcommand finds the bad line."""
    # (argparse takes a flag's unique prefix, so `--bib` for `--bibtex` is no drift: the CLI accepts it too)
    for old, new in [
        ("--corpus scifact --bibtex", "--corpus scifact --bibliography"),
        ("deepresearch eval reports", "deepresearch eval folders"),
    ]:
        drifted = all_text().replace(old, new)
        assert drifted != all_text(), old
        failing = []
        for command in shell_commands(drifted):
            if command.split()[0] != "deepresearch":
                continue
            try:
                [parse_line(form) for form in variants(command)]
            except ParseError:
                failing.append(command)
        assert len(failing) == 1 and new in failing[0], failing
    with pytest.raises(AssertionError, match="no known command"):
        shell_commands(readme_text() + "\n```bash\nconda install dspy-deepresearch\n```\n")


def test_the_lists_match_the_readme():
    """The documents have commands of every kind, and every entry of NOT_RUN and NOT_OURS is still in them."""
    assert set(NOT_RUN) <= set(OURS), set(NOT_RUN) - set(OURS)
    assert set(NOT_OURS) <= set(COMMANDS), set(NOT_OURS) - set(COMMANDS)
    assert all(c in TO_RUN or c in NOT_RUN or c in BENCHMARKS for c in OURS)
    # another program's line (pip, ollama ...) is listed in NOT_OURS as written, never run as ours
    assert {c.split()[0] for c in OURS} <= {"deepresearch", "make", "python"}, OURS
    assert {c for c in shell_commands(readme_text()) if c.split()[0] == "deepresearch"} & set(TO_RUN)
    assert {"make demo", "make test"} <= set(NOT_RUN) and len(TO_RUN) >= 10, TO_RUN


@pytest.mark.parametrize("command", [c for c in OURS if c.split()[0] == "make"])
def test_every_make_target_exists(command):
    done = subprocess.run(
        ["make", "-n", *shlex.split(command)[1:]], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def inline_commands(text: str) -> list[str]:
    """The `deepresearch ...` and `python -m ...` commands quoted inline in the prose."""
    spans = [span.split() for span in re.findall(r"`([^`\n]+)`", text)]  # one word, `deepresearch`, is the package
    return [" ".join(w) for w in spans if len(w) > 1 and (w[0] == "deepresearch" or w[:2] == ["python", "-m"])]


def is_command_name(words: list[str]) -> bool:
    """Whether the words name a command (`run`, `eval gather`) and nothing more."""
    table = cli.COMMANDS
    for word in words:
        if not isinstance(table, dict) or word not in table:
            return False
        table = table[word]
    return bool(words) and not isinstance(table, dict)


def test_inline_commands_parse_too():
    """Commands quoted in the prose: a bare `deepresearch NAME` names a real command, a full one parses,
    `--help` and `--version` answer, and a `python -m` module (or benchmark suite) exists with its flags."""
    spans = inline_commands(all_text())
    assert len(spans) >= 10, spans
    for span in spans:
        words = shlex.split(span)
        if words[0] == "deepresearch" and words[1:] in (["--help"], ["--version"]):
            with contextlib.redirect_stdout(io.StringIO()):
                assert cli.main(words[1:]) == 0, span
        elif words[0] == "deepresearch" and words[-1] == "--help":  # `deepresearch run --help`
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as done:
                cli.main(words[1:])
            assert done.value.code == 0, span
        elif words[0] == "deepresearch" and is_command_name(words[1:]):  # `deepresearch eval gather`
            continue
        elif words[0] == "deepresearch":
            try:
                parse(words[1:])
            except ParseError as err:
                pytest.fail(f"README inline command does not parse: {span}\n{err}")
        else:
            module, *rest = words[2:]
            assert importlib.util.find_spec(module) is not None, span
            if module == "benchmarks":  # `python -m benchmarks NAME` runs benchmarks/bench_NAME.py
                names = [name for name in rest if not name.startswith("-")]
                assert all((ROOT / "benchmarks" / f"bench_{name}.py").is_file() for name in names), span
            else:
                source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
                assert all(f'"{flag}"' in source for flag in rest if flag.startswith("--")), span


# -- running the commands -------------------------------------------------------------------------------


@dataclass
class Workspace:
    """A working folder beside `../shared/data` (a link to $DEEPRESEARCH_DATA), where the README's
    runnable commands run in README order, each once: a later command finds what an earlier one wrote."""

    work: Path
    env: dict
    done: dict = field(default_factory=dict)  # command -> (CompletedProcess, seconds)

    def run_through(self, command: str):
        for earlier in TO_RUN[: TO_RUN.index(command) + 1]:
            if earlier not in self.done:
                started = time.perf_counter()
                line = variants(earlier)[0]  # a synopsis line runs with its optional parts left out
                proc = subprocess.run(
                    ["bash", "-c", line],
                    cwd=self.work,
                    env=self.env,
                    capture_output=True,
                    text=True,
                    timeout=RUN_TIMEOUT_S,
                    check=False,
                )
                self.done[earlier] = (proc, time.perf_counter() - started)
        return self.done[command]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    top = tmp_path_factory.mktemp("readme")
    (top / "shared").mkdir()
    (top / "shared" / "data").symlink_to(data_root().resolve(), target_is_directory=True)
    (top / "work").mkdir()
    (top / "work" / "data").symlink_to(data_root().resolve(), target_is_directory=True)  # "downloaded to data/"
    env = {k: v for k, v in os.environ.items() if k not in ("DEEPRESEARCH_LM", "PYTEST_CURRENT_TEST")}
    env.update(
        DEEPRESEARCH_DATA=str(data_root().resolve()),
        HF_HUB_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    space = Workspace(top / "work", env)
    yield space
    for command, (_, seconds) in space.done.items():  # shown with pytest -s: what the README costs to run
        print(f"{seconds:6.1f} s  {command}")


@pytest.mark.parametrize("command", TO_RUN)
def test_every_offline_command_runs_as_written(command, workspace):
    proc, seconds = workspace.run_through(command)
    assert proc.returncode == 0, f"{command}\nexit {proc.returncode} after {seconds:.0f} s\n{proc.stderr[-3000:]}"
    words = shlex.split(command)
    # every file the command says it wrote (`report: runs/run/report.md`, `heatmap: runs/eco/heatmap.png`)
    written = dict(re.findall(r"^(\w+):\s+(\S*/\S*)\s*$", proc.stdout, re.MULTILINE))
    for label, path in written.items():
        assert (workspace.work / path).exists(), (command, label, path)
    if words[:2] == ["deepresearch", "run"]:
        assert {"report", "trace"} <= set(written), proc.stdout
        for flag, label in PROMISED.items():
            assert (flag in words) == (label in written), (command, written)
        if "--clarify" in words:  # "Without a terminal (CI, pipes) or offline nothing is asked: one line says so"
            said = [line for line in proc.stderr.splitlines() if "--clarify:" in line]
            assert len(said) == 1 and "no clarifying questions" in said[0], proc.stderr
    if words[:2] == ["deepresearch", "index"]:
        assert (workspace.work / words[words.index("--out") + 1] / "manifest.json").is_file(), proc.stdout


# -- the Python example -----------------------------------------------------------------------------------


def test_the_python_example_researches_offline_and_renders(workspace, monkeypatch):
    """The ```python block, run as written from the same folder: an offline report with references, a
    one-line repr, and a notebook view with linked references, the tree and the cost."""
    blocks = [body for lang, body in code_blocks(readme_text()) if lang == "python"]
    assert len(blocks) == 1, f"{len(blocks)} python blocks: give each its own test"
    monkeypatch.chdir(workspace.work)
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    scope: dict = {}
    exec(compile(blocks[0], "README.md (python block)", "exec"), scope)  # noqa: S102 -- the README's own code
    report = scope["out"].report
    assert report.status == "done" and report.stats.lm_calls == 0  # offline=True: no LM
    assert report.question == "Does vitamin D supplementation reduce fracture risk?"
    assert report.references, "the README promises a report with references"
    cited = {
        int(n)
        for group in re.findall(r"\[(\d+(?:, \d+)*)\]", report.markdown.split("## References")[0])
        for n in group.split(", ")
    }
    assert cited == {ref.number for ref in report.references}  # numbered [1]..[n], every one used
    assert 1 <= len(report.tree) <= 3 and max(n.node_id.count(".") for n in report.nodes()) <= 1  # depth 2, breadth 3
    assert "\n" not in repr(report) and len(repr(report)) < 300  # "its repr is one line"
    view = shown(report)
    assert "## References" in view and "**Tree**" in view and "**Cost**" in view
    assert all(" ".join(ref.title.split()).rstrip(". ") in view for ref in report.references)


def test_the_demo_report_begins_as_the_readme_quotes(workspace):
    """`make demo`'s research command (its recipe, without the install step CI runs anyway) writes a
    report.md that begins with the text the ```markdown block quotes, line wrapping aside."""
    recipe = subprocess.run(
        ["make", "-n", "-s", "demo", "STAMP=", f"VENV={BIN.parent}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    proc = subprocess.run(
        ["bash", "-c", recipe],
        cwd=workspace.work,
        env=workspace.env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    quoted = [body for lang, body in code_blocks(readme_text()) if lang == "markdown"]
    assert len(quoted) == 1, f"{len(quoted)} markdown blocks"
    begins = " ".join(quoted[0].split()).removesuffix("...").rstrip()  # the quote ends with "..."
    assert begins.startswith("## ") and len(begins) > 200, begins
    report = (workspace.work / "runs" / "demo" / "report.md").read_text(encoding="utf-8")
    assert " ".join(report.split()).startswith(begins), report[:1500]


def test_the_benchmark_list_names_every_suite_the_readme_runs(capsys):
    from benchmarks.__main__ import main as benchmarks_main

    assert benchmarks_main(["--help"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:] if line.strip()}
    named = set(re.findall(r"python -m benchmarks (\w+)", all_text()))
    assert named and named <= set(listed)
    assert all(len(line.split()) > 3 for line in listed.values())  # each with what it measures
    assert benchmarks_main(["no-such-suite"]) == 2


@pytest.mark.parametrize("command", BENCHMARKS)
def test_every_benchmark_command_names_a_suite(command):
    """`python -m benchmarks NAME [--flag]` or `python -m benchmarks.bench_NAME [--flag]`: the suite exists
    and reads every flag the command gives it."""
    module, *rest = shlex.split(command)[2:]
    names = [w for w in rest if not w.startswith("-")] if module == "benchmarks" else [module.split(".", 1)[1]]
    assert names, command
    for name in names:
        path = ROOT / "benchmarks" / f"{name if name.startswith('bench_') else 'bench_' + name}.py"
        assert path.is_file(), command
        assert all(f'"{flag}"' in path.read_text(encoding="utf-8") for flag in rest if flag.startswith("--")), command
