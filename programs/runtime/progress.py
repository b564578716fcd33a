"""Progress for users, drawn from a run's events: a bar on a terminal or in a notebook, plain lines elsewhere.

`Progress` is an event handler: pass it as `on_event` (`DeepResearch(..., on_event=Progress())`). It chooses
how to show progress from where the output goes:

- a terminal (the stream is a TTY): a tqdm bar whose total is the number of nodes planned so far (it grows as
  the strategy plans more), advanced as nodes finish;
- a Jupyter kernel: tqdm's notebook bar (`tqdm.notebook`) when ipywidgets is installed, else the lines below
  (tqdm would fall back to a text bar with a warning);
- anything else (CI, nohup, a pipe): one line per finished node and one at the end of the run, e.g.
  `[12.3s] node 1.2 done · 5 hits · 3 learnings · effects of vitamin D on bone density`.

Showing progress never fails a run: the first error while drawing (a closed or broken stream) turns the
display off for the rest of the run and is logged at DEBUG.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from typing import Any, Literal, TextIO, cast

from deepresearch.programs.artifacts import Event
from deepresearch.programs.runtime.text import shorten

logger = logging.getLogger(__name__)

Display = Literal["off", "bar", "notebook", "lines"]
DISPLAYS: tuple[str, ...] = ("auto", "off", "bar", "notebook", "lines")
QUERY_CHARS = 60  # a node's query is cut to this many characters in a line or beside the bar
RUN_END_STATS = ("nodes", "searches", "learnings", "failed_nodes")  # of run_end's counts, those worth a line


def choose_display(stream: TextIO) -> Display:
    """`notebook` inside a Jupyter kernel with ipywidgets, `bar` when `stream` is a terminal, `lines` otherwise."""
    if _in_notebook():
        return "notebook" if importlib.util.find_spec("ipywidgets") is not None else "lines"
    try:
        return "bar" if stream.isatty() else "lines"
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return "lines"


def _in_notebook() -> bool:
    # The test tqdm.autonotebook makes, without importing IPython where nothing has imported it yet.
    if "IPython" not in sys.modules:
        return False
    try:
        shell = sys.modules["IPython"].get_ipython()
        return shell is not None and "IPKernelApp" in shell.config
    except (AttributeError, TypeError):  # an IPython too old or too new for this test: no notebook bar
        return False


def describe(event: Event) -> str:
    """One line for an event, for -v's INFO log: `[1.2s] stage_end 1.2 extract · 3 learnings · <message>`."""
    counts = [
        f"{v} {k.replace('_', ' ')}"
        for k, v in event.counts.items()
        if isinstance(v, (int, float, str)) and not isinstance(v, bool)
    ]
    head = " ".join(x for x in (f"[{event.elapsed_s:.1f}s] {event.kind}", event.node_id, event.stage) if x)
    return " · ".join([head, *counts[:6], *([shorten(event.message, QUERY_CHARS)] if event.message else [])])


class _GuardedStream:
    """The stream progress writes to: a failed write is kept in `error` instead of raised.

    tqdm's `refresh` holds its process-wide lock while it writes and does not release it when the write
    raises, so a raising stream would leave every other thread's tqdm bar waiting forever.
    """

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.error: Exception | None = None

    def write(self, text: str) -> int:
        if self.error is None:
            try:
                return self.stream.write(text)
            except Exception as err:  # kept, and raised by Progress outside tqdm's lock
                self.error = err
        return 0

    def flush(self) -> None:
        if self.error is None:
            try:
                self.stream.flush()
            except Exception as err:
                self.error = err

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding: what tqdm asks of its file
        return getattr(self.stream, name)


class Progress:
    """Shows a run's progress from its events.

    Args:
        quiet: Show nothing.
        stream: Where bars and lines go (default: sys.stderr at construction).
        display: `auto` (choose from where `stream` goes: `choose_display`), `bar`, `notebook`, `lines` or `off`.

    Example:
        >>> program = DeepResearch(retriever=retriever, on_event=Progress())
    """

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None, display: str = "auto"):
        if display not in DISPLAYS:
            raise ValueError(f"unknown progress display {display!r}; choose one of: {', '.join(DISPLAYS)}")
        self.stream = stream if stream is not None else sys.stderr
        given = cast(Display, display)  # one of DISPLAYS (checked above); "auto" is resolved here
        self.display: Display = "off" if quiet else (choose_display(self.stream) if display == "auto" else given)
        self._out = _GuardedStream(self.stream)
        self.bar: Any = None  # a tqdm bar, made at the first event that needs one
        self.planned: set[str] = set()  # node ids planned (or started) so far: the bar's total
        self.finished = 0
        self.queries: dict[str, str] = {}

    def __call__(self, event: Event) -> None:
        if event.kind not in ("node_end", "run_end") and logger.isEnabledFor(logging.INFO):
            logger.info("%s", describe(event))  # -v: every step, not only finished nodes (even with -q)
        if self.display == "off":
            return
        try:
            self._show(event)
            error = self._out.error  # a failed write, kept out of tqdm
        except Exception as err:  # whatever goes wrong in showing progress must not fail the research
            error = err
        if error is not None:
            logger.debug("progress display turned off after %s: %s", type(error).__name__, error)
            self.display = "off"
            self.close()

    def close(self) -> None:
        """Removes the bar, if any; safe to call more than once."""
        try:
            self._close_bar()
        except Exception as err:
            logger.debug("closing the progress bar failed: %s", err)

    def _show(self, event: Event) -> None:
        if event.kind == "run_start":  # one handler may watch several runs (a notebook)
            self.planned, self.finished, self.queries = set(), 0, {}
        elif event.kind in ("node_planned", "node_start"):
            # counting started nodes as well keeps the total right for a strategy that plans without announcing
            if event.message:
                self.queries.setdefault(event.node_id, event.message)
            if event.node_id not in self.planned:
                self.planned.add(event.node_id)
                self._grow_bar()
        elif event.kind == "node_end":
            self.planned.add(event.node_id)
            self.finished += 1
            self._node_done(event)
        elif event.kind == "run_end":
            self._run_done(event)
        elif event.kind == "stage_end" and event.stage in ("round", "gather"):
            self._gathering(event)  # the gather strategy's loop: rounds before any node exists

    def _grow_bar(self) -> None:
        if self.display not in ("bar", "notebook"):
            return
        bar = self._bar()
        if bar.total != len(self.planned):
            bar.total = len(self.planned)
            widget = getattr(bar, "container", None)  # tqdm.notebook's widget keeps its own maximum
            if widget is not None:
                widget.children[1].max = bar.total
            bar.refresh()

    def _node_done(self, event: Event) -> None:
        query = self.queries.get(event.node_id, "")
        if self.display == "lines":
            counts = [
                f"{v} {k.replace('_', ' ')}"
                for k, v in event.counts.items()
                if isinstance(v, int) and not isinstance(v, bool)
            ]
            parts = [f"[{event.elapsed_s:.1f}s] node {event.node_id} {event.message or 'ended'}", *counts]
            self._line(" · ".join(parts + ([shorten(query, QUERY_CHARS)] if query else [])))
        else:
            self._grow_bar()  # a node that ends unannounced still counts
            bar = self._bar()
            bar.set_postfix_str(shorten(query, 40), refresh=False)
            bar.update(1)

    def _gathering(self, event: Event) -> None:
        counts = [f"{v} {k}" for k, v in event.counts.items() if isinstance(v, int) and not isinstance(v, bool)]
        what = f"round {event.node_id.rsplit(':', 1)[-1]}" if event.stage == "round" else f"done ({event.message})"
        text = " · ".join([f"[{event.elapsed_s:.1f}s] gathering {what}", *counts])
        if self.bar is not None:  # above the bar, which stays
            self.bar.write(text, file=self._out if self.display == "bar" else None)
        else:
            self._line(text)

    def _run_done(self, event: Event) -> None:
        if self.display == "lines":
            stats = [f"{event.counts[k]} {k.replace('_', ' ')}" for k in RUN_END_STATS if k in event.counts]
            stats = stats or [f"{self.finished} nodes"]
            self._line(" · ".join([f"[{event.elapsed_s:.1f}s] run {event.message or 'ended'}", *stats]))
        else:
            self._close_bar()

    def _line(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()

    def _bar(self) -> Any:
        # made at the first node, with a total of at least 1: a notebook bar made with none stays an info bar
        if self.bar is None:
            if self.display == "notebook":
                from tqdm.notebook import tqdm

                self.bar = tqdm(total=len(self.planned), unit="node", desc="researching")
            else:
                from tqdm import tqdm

                self.bar = tqdm(
                    total=len(self.planned),
                    unit="node",
                    desc="researching",
                    file=self._out,
                    leave=False,
                    dynamic_ncols=True,
                )
        return self.bar

    def _close_bar(self) -> None:
        bar, self.bar = self.bar, None
        if bar is not None:
            bar.close()
