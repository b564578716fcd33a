"""The command line's option reference, rendered from the parsers themselves: every command, its usage, and
each option with its help, in Markdown. docs/hooks.py puts it into docs/reference/cli.md when the site is
built, so the reference cannot fall behind the commands (tests/test_cli_help.py checks it names them all)."""

from __future__ import annotations

import argparse
import html
import importlib

from deepresearch.cli import command_parser, commands

MARKER = "<!-- options of every command: generated from the parsers (deepresearch.cli.reference) -->"


def _text(value: str) -> str:
    """Help text as Markdown: HTML-escaped (`<question-slug>` is text), one line."""
    return html.escape(" ".join(value.split()), quote=False).replace("*", "\\*").replace("_", "\\_")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()  # argparse renders invocations and expands %(default)s only here
    lines: list[str] = []
    for group in parser._action_groups:
        shown = [
            a for a in group._group_actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
        ]
        if not shown:
            continue
        lines += ["", f"*{group.title}*" + (f": {_text(group.description)}" if group.description else ""), ""]
        for action in shown:
            invocation = formatter._format_action_invocation(action)
            help_text = formatter._expand_help(action) if action.help else ""
            lines.append(f"- `{invocation}`" + (f": {_text(help_text)}" if help_text else ""))
    return lines


def markdown(level: int = 3) -> str:
    """Every command's reference: a heading per command (at `level`), its summary, usage and options."""
    out: list[str] = []
    for prog, module, summary in commands():
        parser = command_parser(prog, importlib.import_module(module), summary)
        usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
        out += [f"{'#' * level} `{prog}`", "", _text(parser.description or summary), "", "```text", usage, "```"]
        out += _options(parser) + [""]
    return "\n".join(out)


def render(page: str) -> str:
    """`page` with its MARKER replaced by the reference (unchanged when it has none)."""
    return page.replace(MARKER, markdown()) if MARKER in page else page
