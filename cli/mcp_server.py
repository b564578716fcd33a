"""The tools `deepresearch mcp` serves: search a corpus, research a question, read a finished run.

An agent (an MCP client) calls them over the official MCP SDK's `MCPServer`. `research` is the run of
`deepresearch run`: the same program, LM session and run folder (report.md, trace.json, report.html, run.json),
one new folder per call under the server's `--out`. Its progress (nodes done of nodes planned) goes to the
client as MCP progress notifications. A bad argument (an empty question, an unknown corpus, depth 0, a folder
that holds no run) comes back as a tool error whose text is the library's one-line message, and the server
goes on serving. Retrievers are opened once per corpus and kept for the life of the server.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from deepresearch.cli import research_run
from deepresearch.cli import run as run_cli
from deepresearch.programs.artifacts import Event
from deepresearch.programs.lm.models import LMPreflightError
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.lm.session import LMSession
from deepresearch.programs.retrieval import data_dir
from deepresearch.programs.runtime.events import EventHandler
from deepresearch.programs.runtime.outputs import RUN_RECORD, open_run, os_error_line, out_folder_lock
from deepresearch.programs.runtime.text import printable, shorten
from deepresearch.retrievers.extras import MissingExtra, check_extras
from deepresearch.retrievers.open import Retrieval, open_retriever
from deepresearch.retrievers.sources import DEFAULT_CORPUS

logger = logging.getLogger(__name__)

SNIPPET_CHARS = 300  # of a hit's text in `search`'s answer
# what a tool raises for bad input, answered as a tool error with its first line (as the CLI prints it)
EXPECTED_ERRORS = (ValueError, OSError, LMPreflightError, MissingExtra)
CorpusName = Annotated[
    str, Field(description="a dataset name (scifact), a .jsonl file, a BEIR folder or a folder of PDFs")
]
INSTRUCTIONS = (
    "Research questions over a corpus of scientific papers (default: the SciFact abstracts). `search` finds "
    "papers for a query; `research` plans queries, reads what they find and writes a cited report into a run "
    "folder (minutes with a language model); `read_run` reads a run folder again."
)
T = TypeVar("T")


class SearchHit(BaseModel):
    """One paper found for the query."""

    doc_id: str = Field(description="the paper's id in the corpus")
    title: str
    score: float = Field(description="the retriever's score; higher is better")
    rank: int = Field(description="1 is the best")
    snippet: str = Field(description=f"the start of its text, at most {SNIPPET_CHARS} characters")


class SearchResult(BaseModel):
    """The papers a search found, best first."""

    corpus: str
    hits: list[SearchHit]


class ReferenceEntry(BaseModel):
    """One reference of a report: [number] in the report's text cites it."""

    number: int
    doc_id: str = Field(description="the paper's id in the corpus")
    title: str
    url: str | None = None


class RunResult(BaseModel):
    """A run folder: its report, status and references."""

    folder: str = Field(description="the run folder (absolute path); read_run reads it again")
    question: str
    status: str = Field(description="done, partial, failed, interrupted or error; running while it works")
    error: str = Field(description="why the run is not done; empty when it is")
    report: str = Field(description="report.md: the cited report in Markdown; empty until the run writes it")
    references: list[ReferenceEntry]


def one_line(err: BaseException) -> str:
    """The error as the command line prints it: its first line, or the file and cause of an OSError, redacted."""
    if isinstance(err, OSError) and err.errno:
        return redact(os_error_line(err))
    text = str(err)
    return redact(text.splitlines()[0] if text else type(err).__name__)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{path} is not JSON ({err}); the run that wrote it did not finish it") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds no run record (a JSON object); pass the folder of a run")
    return value


def read_run(path: str | Path) -> RunResult:
    """The report, status and references of a run folder (of the `research` tool or `deepresearch run`).

    Raises:
        FileNotFoundError: `path` is not a folder, or holds no run (neither run.json nor trace.json).
        ValueError: its run.json or trace.json is not JSON.
    """
    folder = Path(path).expanduser()
    if not str(path).strip() or not folder.is_dir():
        raise FileNotFoundError(f"{path!s} is not a folder; pass a run folder (research's `folder`, or a run --out)")
    record, trace = _read_json(folder / RUN_RECORD), _read_json(folder / "trace.json")
    if record is None and trace is None:
        raise FileNotFoundError(
            f"{folder} holds no run (no {RUN_RECORD} or trace.json); pass a run folder (research's `folder`, "
            f"or a run --out)"
        )
    record, trace = record or {}, trace or {}
    report = folder / "report.md"
    references = [
        ReferenceEntry(number=r["number"], doc_id=r["doc_id"], title=r.get("title") or "", url=r.get("url"))
        for r in trace.get("references") or ()
    ]
    return RunResult(
        folder=str(folder.resolve()),
        question=record.get("question") or trace.get("question") or "",
        status=record.get("status") or trace.get("status") or "unknown",
        error=redact(str(record.get("error") or trace.get("error") or "")),
        report=report.read_text(encoding="utf-8") if report.exists() else "",
        references=references,
    )


@dataclass
class ResearchTools:
    """What the tools share for the life of the server: the LM session, the options, and opened retrievers.

    Args:
        session: The LM session of the server's `--lm` options (offline without one), opened once.
        options: The `deepresearch mcp` options: its LM options apply to every research run.
        out: The folder the research runs go to, one sub-folder each.
    """

    session: LMSession
    options: argparse.Namespace
    out: Path
    _retrievals: dict[str, Retrieval] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _run_defaults: dict[str, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        parser = argparse.ArgumentParser(add_help=False)
        run_cli.add_arguments(parser)
        self._run_defaults = vars(parser.parse_args(["--", "?"]))

    def retrieval(self, corpus: str) -> Retrieval:
        """The corpus's BM25 retriever, opened on first use (as `deepresearch run --corpus` opens it)."""
        name = corpus.strip()
        with self._lock:  # one opening per corpus, however many calls ask at once
            if name not in self._retrievals:
                self._retrievals[name] = open_retriever(name, data_dir=data_dir())
            return self._retrievals[name]

    def search(self, query: str, k: int, corpus: str) -> SearchResult:
        if not query.strip():
            raise ValueError("query is empty; pass the words to search for")
        hits = self.retrieval(corpus).retriever.search(query, k)
        return SearchResult(
            corpus=corpus,
            hits=[
                SearchHit(
                    doc_id=h.doc.doc_id,
                    title=h.doc.title,
                    score=round(float(h.score), 4),
                    rank=h.rank,
                    snippet=shorten(h.doc.text, SNIPPET_CHARS),
                )
                for h in hits
            ],
        )

    def read_run(self, path: str) -> RunResult:
        return read_run(path)

    def run_args(self, question: str, **given: Any) -> argparse.Namespace:
        """The options of `deepresearch run` for this call: run's defaults, the server's LM options, `given`."""
        lm_options = {
            k: v for k, v in vars(self.options).items() if k in self._run_defaults and k not in ("out", "quiet")
        }
        chosen = {k: v for k, v in given.items() if v is not None}
        return argparse.Namespace(**{**self._run_defaults, **lm_options, **chosen, "question": question, "quiet": True})

    def new_folder(self, question: str) -> Path:
        """A new folder under `out` for one run: `YYYYmmdd-HHMMSS-<question-slug>`, `-2`... if taken."""
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{research_run.slug(question)}"
        for n in range(1, 1000):
            folder = self.out / (stem if n == 1 else f"{stem}-{n}")
            try:
                folder.mkdir(parents=True)
            except FileExistsError:
                continue
            return folder
        raise FileExistsError(f"{self.out} holds runs {stem} to {stem}-999; pass the server another --out")

    def research(
        self,
        question: str,
        *,
        depth: int | None = None,
        breadth: int | None = None,
        hits: int | None = None,
        preset_name: str | None = None,
        corpus: str | None = None,
        verify: str | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """Runs the program on `question` into a new folder, as `deepresearch run` does; the folder's result.

        Every setting is checked before any work: a bad one raises ValueError with the library's message.
        """
        question = printable(question).strip()
        if not question:
            raise ValueError("question is empty; pass the research question as a non-empty string")
        args = self.run_args(
            question,
            depth=depth,
            breadth=breadth,
            hits=hits,
            preset=preset_name,
            verify=verify,
            corpus=DEFAULT_CORPUS if corpus is None else corpus,
        )
        config = research_run.run_config(args)  # depth 0, an unknown preset...
        check_extras(research_run.needed_extras(args, config))
        retrieval = self.retrieval(args.corpus)
        folder = self.new_folder(question)
        args.out = str(folder)
        with out_folder_lock(folder), open_run(folder, question) as run:
            research_run.run_research(args, self.session, retrieval, run, answers=(), on_event=on_event)
        return read_run(folder)


async def in_thread(work: Callable[[], T]) -> T:
    """`work` in a worker thread (a run blocks for minutes; the server keeps answering); its bad-input errors
    as a tool error carrying their one-line message."""
    try:
        return await anyio.to_thread.run_sync(work)
    except EXPECTED_ERRORS as err:
        raise ToolError(one_line(err)) from err


def progress_sender(ctx: Context) -> EventHandler:
    """An event handler, called in the run's thread, that reports each finished node to the client: nodes done
    of nodes planned. MCP wants the progress value to grow with every notification, so only a finished node
    makes one; the total is the nodes planned so far (it grows as the tree does)."""
    token = anyio.lowlevel.current_token()
    planned: set[str] = set()
    done = 0

    def on_event(event: Event) -> None:
        nonlocal done
        if event.kind in ("node_planned", "node_start", "node_end"):
            planned.add(event.node_id)
        if event.kind != "node_end":
            return
        done += 1
        message = f"node {event.node_id} {event.message or 'ended'}"
        try:
            anyio.from_thread.run(ctx.report_progress, done, len(planned), message, token=token)
        except Exception as err:  # a notification that cannot be sent must not stop the research
            logger.debug("progress notification not sent: %s: %s", type(err).__name__, err)

    return on_event


def build_server(tools: ResearchTools) -> MCPServer:
    """The MCP server with the three tools over `tools`."""
    server = MCPServer(name="deepresearch", instructions=INSTRUCTIONS)

    @server.tool()
    async def search(
        query: Annotated[str, Field(description="what to search for, in words")],
        k: Annotated[int, Field(description="how many papers to return")] = 10,
        corpus: CorpusName = DEFAULT_CORPUS,
    ) -> SearchResult:
        """Search a corpus of papers with BM25; the best hits with their ids, titles, scores and the start of
        their text."""
        return await in_thread(functools.partial(tools.search, query, k, corpus))

    @server.tool()
    async def research(
        ctx: Context,
        question: Annotated[str, Field(description="the research question")],
        depth: Annotated[int | None, Field(description="levels of the research tree (default: the preset's)")] = None,
        breadth: Annotated[int | None, Field(description="tasks planned at the root (default: the preset's)")] = None,
        hits: Annotated[int | None, Field(description="papers retrieved per search (default: the preset's)")] = None,
        preset: Annotated[
            str | None,
            Field(description="quick, standard (the default), deep, eco, hero, parallel or gather"),
        ] = None,
        corpus: CorpusName = DEFAULT_CORPUS,
        verify: Annotated[
            str | None,
            Field(description="check each claim against its sources: rewrite (default), remove, mark or off"),
        ] = None,
    ) -> RunResult:
        """Research a question: plan queries, search the corpus, read what is found and write a cited report
        into a new run folder. Returns the report (Markdown), its references, the folder and the run's status
        (done, or partial/failed with the reason). Progress is reported as nodes done of nodes planned."""
        work = functools.partial(
            tools.research,
            question,
            depth=depth,
            breadth=breadth,
            hits=hits,
            preset_name=preset,
            corpus=corpus,
            verify=verify,
            on_event=progress_sender(ctx),
        )
        return await in_thread(work)

    @server.tool()
    async def read_run(
        path: Annotated[str, Field(description="a run folder: research's `folder`, or a deepresearch run --out")],
    ) -> RunResult:
        """Read a run folder: its report (Markdown), status, error and references."""
        return await in_thread(functools.partial(tools.read_run, path))

    return server
