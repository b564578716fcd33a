"""`deepresearch mcp`: serve the research program to agents, as the tools of an MCP server over stdio.

An MCP client (an agent, an editor, a desktop assistant) starts the command and talks to it over its stdin
and stdout; the tools are `search`, `research` and `read_run` (`deepresearch.cli.mcp_server`). Every
`research` call writes a run folder under `--out`, as `deepresearch run` does. Without `--lm` (and
$DEEPRESEARCH_LM) the research is offline; with it, the LM options are those of `run`, checked once when
the server starts. Needs the [mcp] extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import add_output_arguments
from deepresearch.retrievers.extras import require

DEFAULT_OUT = "runs/mcp"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s [--out DIR] [--lm MODEL [--api-base URL]] [options]"
    add_output_arguments(
        parser,
        out_default=DEFAULT_OUT,
        out_help=f"folder of the research tool's runs, one sub-folder per call (default {DEFAULT_OUT}, from the "
        "folder the client starts the server in)",
    )
    add_lm_arguments(parser)


def main(args: argparse.Namespace) -> int:
    require("mcp.server.mcpserver", "mcp", "deepresearch mcp (an MCP server)")  # a missing SDK: one line, at once
    if not str(args.out).strip():
        raise ValueError(f"--out is empty; pass a folder, or leave --out out for {DEFAULT_OUT}")
    from deepresearch.programs.lm.session import open_lm  # lazy: start-up
    from deepresearch.programs.runtime.outputs import check_writable  # lazy: start-up

    out = check_writable(Path(args.out).expanduser().resolve())
    session = open_lm(args, num_retries=0)  # as `run` opens it: checked here, once, before any client calls
    from deepresearch.cli.mcp_server import ResearchTools, build_server  # lazy: optional extra

    server = build_server(ResearchTools(session=session, options=args, out=out))
    if not args.quiet:
        print(
            f"deepresearch mcp: serving search, research and read_run over stdio ({session.model}); runs go to {out}",
            file=sys.stderr,
            flush=True,
        )
    server.run("stdio")  # until the client closes stdin
    return 0
