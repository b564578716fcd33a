"""The `deepresearch` command: a thin dispatcher over its subcommands, one module each in this package.

The command line sits on top of the library: nothing below `deepresearch.cli` imports it. A subcommand
module is imported only when it is used, so `deepresearch --help` stays instant and a failing optional
dependency breaks only its own command. Each module provides `add_arguments(parser)` and
`main(args) -> int`; building the parser imports no DSPy, LiteLLM, numpy or torch (`main` loads what the
command needs), so `deepresearch COMMAND --help` is instant too. Options every command takes (-v, -q, --config) are taken
here, wherever they stand before `--`.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import importlib
import logging
import os
import sys
import threading
from pathlib import Path

from deepresearch.cli.options import bound_numbers, check_numbers
from deepresearch.programs.formats.config_file import (
    ConfigFileError,
    command_defaults,
    find_config,
    global_settings,
    read_config,
)
from deepresearch.programs.lm.secrets import (
    RedactingFilter,
    RedactingStream,
    redact,
    register_secret,
    strip_url_credentials,
)

# name -> (module, one-line help); nested dicts are command groups (`deepresearch eval retrieval`).
COMMANDS: dict[str, tuple[str, str] | dict[str, tuple[str, str]]] = {
    "run": ("deepresearch.cli.run", "research a question and write report.md and trace.json"),
    "batch": ("deepresearch.cli.batch", "research every question of a JSONL file, one resumable run folder each"),
    "optimize": ("deepresearch.cli.optimize", "compile a program against a benchmark metric and save it"),
    "view": (
        "deepresearch.cli.view",
        "open a run's report.html (the report, its evidence, tree and cost) in the browser",
    ),
    "index": ("deepresearch.cli.index", "build a persistent BM25 / dense index of a corpus"),
    "mcp": (
        "deepresearch.cli.mcp",
        "serve search, research and read_run as tools of an MCP server over stdio, for agents",
    ),
    "eval": {
        "retrieval": (
            "deepresearch.cli.eval_retrieval",
            "nDCG@10, Recall@100, MRR, MAP of BM25, dense and hybrid on BEIR qrels",
        ),
        "reports": (
            "deepresearch.cli.eval_reports",
            "source-integration and quality metrics of a folder of reports, by configuration",
        ),
        "report": ("deepresearch.cli.eval_report", "run the program over a question set and score its reports"),
        "gather": (
            "deepresearch.cli.eval_gather",
            "run the gathering loop or a baseline over a query set and score it (ScholarGym)",
        ),
        "taxonomy": ("deepresearch.cli.eval_taxonomy", "build taxonomies for TaxoBench surveys and score them"),
        "taxonomy-score": (
            "deepresearch.cli.eval_taxonomy_score",
            "score a TaxoBench prediction file against the expert trees",
        ),
    },
}


DESCRIPTION = """\
Research a question over a corpus of papers and write a cited report (report.md) with the trace of how it
was made (trace.json). Without a language model (no --lm, no DEEPRESEARCH_LM) every stage runs offline:
an extractive report quoted from the abstracts it cites.

  deepresearch run "Does obesity increase the risk of type 2 diabetes?" --corpus scifact
  deepresearch run "..." --corpus scifact --lm openai/gpt-4.1-mini --preset quick
  deepresearch COMMAND --help        the options of one command"""

EPILOG = """\
presets (run --preset NAME; `standard` is the default):
  quick     depth 1 x breadth 2: a first look, the fewest LM calls
  standard  depth 2 x breadth 3, the eco recursion (the default)
  deep      depth 4 x breadth 4, the eco recursion
  eco       DeepResearch-Eco's reference setup: the recursion at breadth 4, halving it at each level (2 x 4)
  hero      submodular query selection, batched extraction with early stopping (2 x 3, at most 76 LM calls)
  parallel  adaptive breadth and depth with a pruning monitor (depth up to 10, a 10-minute budget)
  gather    ScholarGym's planner-assessor loop, then extraction from the papers it selected

options of every command (before or after the command's own):
  -v, -vv           more detail: INFO logs (each stage and search), then DEBUG
  -q                no progress bars or lines; only results and errors
  --config FILE     settings for the commands (default: ./deepresearch.toml when it exists); a [run] table
                    holds run's options by their long names, e.g. preset = "quick", corpus = "scifact"

Corpora: a dataset name under $DEEPRESEARCH_DATA (scifact), a .jsonl file, a BEIR folder, a folder of PDFs,
a .bib/.ris/.csv reference file, or hf:NAME (the [hf] extra)."""


class UsageError(Exception):
    """Bad input found before any work started; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """A command's parser whose errors are one line: a mistyped option names the nearest real one
    (`--depht`: did you mean --depth?) instead of printing the whole usage."""

    def error(self, message: str):
        hint = ""
        one = message.removeprefix("one of the arguments ").removesuffix(" is required")
        if one != message and " " not in one:  # a required option with deprecated spellings (options.py)
            message = f"the following arguments are required: {one}"
        if message.startswith("unrecognized arguments: "):
            options = [
                o
                for action in self._actions
                for o in action.option_strings
                if o.startswith("--") and action.help != argparse.SUPPRESS
            ]  # no deprecated spelling
            typed = [w.partition("=")[0] for w in message.removeprefix("unrecognized arguments: ").split()]
            near = next(
                (m for w in typed if w.startswith("-") for m in difflib.get_close_matches(w, options, n=1, cutoff=0.6)),
                None,
            )
            hint = f"; did you mean {near}?" if near else ""
        self.exit(2, f"{self.prog}: error: {message}{hint} ({self.prog} --help lists the options)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dspy-deepresearch")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _parser_for(prog: str, table: dict) -> argparse.ArgumentParser:
    top = prog == "deepresearch"
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION if top else None,
        epilog=EPILOG if top else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if top:
        parser.add_argument("--version", action="version", version=f"deepresearch {_version()}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v for INFO logs, -vv for DEBUG")
    parser.add_argument("-q", "--quiet", action="store_true", help="show no progress (bars or lines)")
    parser.add_argument("--config", metavar="FILE", help="a TOML settings file (default ./deepresearch.toml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, entry in table.items():
        help_text = entry[1] if isinstance(entry, tuple) else f"{name} subcommands"
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _resolve(argv: list[str], prog: str, table: dict) -> tuple[str, str, list[str], str] | int:
    parser = _parser_for(prog, table)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    if argv[0] == "--version" and prog == "deepresearch":
        print(f"deepresearch {_version()}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in table:
        near = difflib.get_close_matches(name, list(table), n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        print(f"{prog}: unknown command {name!r}{hint} (choose one of: {', '.join(table)})", file=sys.stderr)
        return 2
    entry = table[name]
    if isinstance(entry, dict):
        return _resolve(rest, f"{prog} {name}", entry)
    return f"{prog} {name}", entry[0], rest, entry[1]


def commands(table: dict | None = None, prog: str = "deepresearch") -> list[tuple[str, str, str]]:
    """(prog, module, one-line help) of every command, the groups' commands included
    (`deepresearch eval retrieval`), in the table's order."""
    out: list[tuple[str, str, str]] = []
    for name, entry in (COMMANDS if table is None else table).items():
        if isinstance(entry, dict):
            out += commands(entry, f"{prog} {name}")
        else:
            out.append((f"{prog} {name}", *entry))
    return out


def command_parser(prog: str, module, summary: str) -> Parser:
    """The parser of one command: its module's `add_arguments` under the command's one-line help."""
    parser = Parser(
        prog=prog,
        description=summary[:1].upper() + summary[1:] + ".",
        epilog="-v/-vv (more detail), -q (no progress) and --config FILE (settings, "
        "default ./deepresearch.toml) work here too; see deepresearch --help",
    )
    module.add_arguments(parser)
    bound_numbers(parser)  # every numeric option, on the command line and in the settings file alike
    return parser


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM stops a command as Ctrl-C does (KeyboardInterrupt, so that its pools stop their workers and its
    files are closed), then exits 143; a command with handlers of its own (run, batch) installs them inside."""
    import signal

    def terminated(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread (a test, an embedding program): signals stay as they are
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _take_global_options(argv: list[str]) -> tuple[int, bool, str | None, list[str]]:
    """(verbosity, quiet, --config, the other arguments): -v/-vv/--verbose, -q/--quiet and --config FILE,
    wherever they stand before `--`."""
    verbose, quiet, config, rest = 0, False, None, []
    args = iter(enumerate(argv))
    for i, arg in args:
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            verbose += 1 if arg == "--verbose" else len(arg) - 1
        elif arg in ("-q", "--quiet"):
            quiet = True
        elif arg == "--config" or arg.startswith("--config="):
            config = arg.partition("=")[2] if "=" in arg else next(args, (i, None))[1]
            if not config:
                raise UsageError("--config needs a FILE: the path of a TOML settings file")
        else:
            rest.append(arg)
    return verbose, quiet, config, rest


def _settings(config: str | None) -> tuple[Path | None, dict]:
    """The settings file (--config, else ./deepresearch.toml when it exists) and what it holds."""
    path = find_config(config)
    return path, (read_config(path) if path else {})


def run_command() -> None:
    """The `deepresearch` console command: `main`, then exit with its code.

    A stopped command (exit 130 or 143) leaves at once: worker threads still waiting on an LM reply would
    otherwise hold the interpreter up to --lm-timeout, and whatever they brought back would be discarded (a
    stopped run records nothing more; its files are already written)."""
    code = main()
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if code in (130, 143) and any(t.is_alive() for t in others):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    # every line this command writes to the terminal passes the redaction point (secrets.py)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        return _main(argv)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = streams


def _register_settings_secrets(settings: dict) -> None:
    """Registers the credentials a settings file holds (a URL's password, a key-named value) for redaction."""
    for key, value in settings.items():
        if isinstance(value, dict):
            _register_settings_secrets(value)
        elif isinstance(value, str):
            if "://" in value:
                strip_url_credentials(value)
            if any(word in key.lower() for word in ("key", "token", "secret", "password")):
                register_secret(value)


def _main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network call for LiteLLM's price map

    try:
        verbose, quiet, config, argv = _take_global_options(list(sys.argv[1:] if argv is None else argv))
        path, settings = _settings(config)
        _register_settings_secrets(settings)
        if path is not None:
            groups = {name: set(entry) for name, entry in COMMANDS.items() if isinstance(entry, dict)}
            given = global_settings(settings, path, set(COMMANDS), groups)
            verbose, quiet = verbose or given.get("verbose", 0), quiet or given.get("quiet", False)
    except (UsageError, ConfigFileError) as err:
        print(f"deepresearch: error: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )

    for handler in logging.getLogger().handlers:  # no key reaches a log line, whichever library wrote it
        # once per handler: each command run in one process (a notebook, the tests) would add another
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    resolved = _resolve(argv, "deepresearch", COMMANDS)
    if isinstance(resolved, int):
        return resolved
    prog, module_name, rest, summary = resolved
    from deepresearch.retrievers.extras import MissingExtra  # lazy: start-up

    try:
        module = importlib.import_module(module_name)
    except MissingExtra as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    parser = command_parser(prog, module, summary)
    if path is not None:  # the settings file's table for this command: defaults the command line overrides
        try:
            parser.set_defaults(**command_defaults(settings, path, prog.removeprefix("deepresearch "), parser))
        except ConfigFileError as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
    quiet = quiet or bool(parser.get_default("quiet"))  # a settings file's old `no_progress = true` too
    parser.set_defaults(verbose=verbose, quiet=quiet)  # a command reads args.quiet to show no progress
    args = parser.parse_args(rest)
    from deepresearch.programs.lm.models import LMPreflightError  # lazy: start-up

    try:
        check_numbers(parser, args)  # the settings file's values were checked as it was read
        with _terminate_as_interrupt():
            return int(module.main(args) or 0)
    except (UsageError, ValueError, FileNotFoundError, PermissionError, LMPreflightError, MissingExtra) as err:
        # One line naming the problem; library errors are written to say what to do.
        print(f"{prog}: error: {redact(str(err).splitlines()[0] if str(err) else type(err).__name__)}", file=sys.stderr)
        return 2
    except OSError as err:  # a file or folder the command could not use: one line naming it and the cause
        from deepresearch.programs.runtime.outputs import os_error_line  # lazy: start-up

        print(
            f"{prog}: error: {redact(os_error_line(err) if err.errno else str(err) or type(err).__name__)}",
            file=sys.stderr,
        )
        return 3 if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO) else 2
    except KeyboardInterrupt as err:
        terminated = str(err) == "SIGTERM"
        print(f"{prog}: interrupted{' (SIGTERM)' if terminated else ''}", file=sys.stderr)
        return 143 if terminated else 130
