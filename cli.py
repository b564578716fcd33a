"""The `deepresearch` command: a thin dispatcher over subcommands owned by each package.

A subcommand module is imported only when it is used, so `deepresearch --help` stays instant and a
failing optional dependency breaks only its own command. Each module provides
`add_arguments(parser)` and `main(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

# name -> (module, one-line help); nested dicts are command groups (`deepresearch eval retrieval`).
COMMANDS: dict[str, tuple[str, str] | dict[str, tuple[str, str]]] = {
    "run": ("programs.cli", "research a question and write report.md and trace.json"),
    "optimize": ("optimize.cli", "compile a program against a benchmark metric and save it"),
    "index": ("retrievers.cli", "build a persistent BM25 / dense index of a corpus"),
    "eval": {
        "retrieval": ("eval.run_retrieval", "nDCG@10, Recall@100, MRR, MAP of BM25, dense and hybrid on BEIR qrels"),
        "reports": ("eval.run_reports", "source-integration and quality metrics of a folder of reports, by configuration"),
        "report": ("eval.run_report", "run the program over a question set and score its reports"),
        "gather": ("eval.run_gather", "run the gathering loop or a baseline over a query set and score it (spec 004)"),
        "taxonomy": ("eval.run_taxonomy", "build taxonomies for TaxoBench surveys and score them (spec 003)"),
        "taxonomy-score": ("eval.score_taxonomy", "score a TaxoBench prediction file against the expert trees"),
    },
}


class UsageError(Exception):
    """Bad input found before any work started; printed as one line, exit code 2."""


def _parser_for(prog: str, table: dict) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v for INFO logs, -vv for DEBUG")
    parser.add_argument("-q", "--quiet", action="store_true", help="show no progress (bars or lines)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, entry in table.items():
        help_text = entry[1] if isinstance(entry, tuple) else f"{name} subcommands"
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _resolve(argv: list[str], prog: str, table: dict) -> tuple[str, str, list[str]] | int:
    parser = _parser_for(prog, table)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in table:
        print(f"{prog}: unknown command {name!r}; choose one of: {', '.join(table)}", file=sys.stderr)
        return 2
    entry = table[name]
    if isinstance(entry, dict):
        return _resolve(rest, f"{prog} {name}", entry)
    return f"{prog} {name}", entry[0], rest


def _take_global_options(argv: list[str]) -> tuple[int, bool, list[str]]:
    """(verbosity, quiet, the other arguments): -v/-vv/--verbose and -q/--quiet, wherever they stand before `--`."""
    verbose, quiet, rest = 0, False, []
    for i, arg in enumerate(argv):
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            verbose += 1 if arg == "--verbose" else len(arg) - 1
        elif arg in ("-q", "--quiet"):
            quiet = True
        else:
            rest.append(arg)
    return verbose, quiet, rest


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network call for LiteLLM's price map
    verbose, quiet, argv = _take_global_options(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    from programs.runtime.secrets import RedactingFilter, redact

    for handler in logging.getLogger().handlers:  # no key reaches a log line, whichever library wrote it
        handler.addFilter(RedactingFilter())
    resolved = _resolve(argv, "deepresearch", COMMANDS)
    if isinstance(resolved, int):
        return resolved
    prog, module_name, rest = resolved
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog)
    module.add_arguments(parser)
    parser.set_defaults(verbose=verbose, quiet=quiet)  # a command reads args.quiet to show no progress
    args = parser.parse_args(rest)
    from programs.runtime.lm import LMPreflightError

    try:
        return int(module.main(args) or 0)
    except (UsageError, ValueError, FileNotFoundError, PermissionError, LMPreflightError) as err:
        # One line naming the problem; library errors are written to say what to do.
        print(f"{prog}: error: {redact(str(err).splitlines()[0] if str(err) else type(err).__name__)}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
