"""Executing examples/research_scifact.ipynb headless, and the parts of its outputs that must not change.

The notebook is committed with its outputs, so a reader on a code host sees what it does. The cells that
need no LM are deterministic (BM25 over the embedded corpus, the offline stages); `comparable` keeps what
they show, less what varies between runs (timings, progress widgets, temporary paths), so a test can tell
when the saved outputs no longer match the code.

Refresh the saved outputs after a change (an LM, if one is configured, fills the LM sections):

    .venv/bin/python -m tests.notebook_outputs --write
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "research_scifact.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"
LM_SKIPPED = "LM sections skipped: set DEEPRESEARCH_LM"
_VOLATILE = [
    (re.compile(r"\b\d+(?:\.\d+)? ?s\b"), "<secs>"),  # elapsed seconds
    (re.compile(r"/tmp/[\w./-]+|deepresearch-notebook-\w+"), "<tmp>"),
]


def execute(path: Path = NOTEBOOK, cwd: str | Path | None = None, timeout: int = 600):
    """The notebook run top to bottom in a fresh kernel (the kernel inherits this process's environment);
    raises CellExecutionError, naming the cell, on any error."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(cwd or tempfile.gettempdir())}},
    )
    client.execute()
    for cell in notebook.cells:  # progress bars are live widgets: a saved copy shows only "0%"
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
    notebook.metadata.pop("widgets", None)  # and their state
    return notebook


def is_lm_cell(cell) -> bool:
    return cell.cell_type == "code" and ("DEEPRESEARCH_LM" in cell.source or "if lm is not None" in cell.source)


def shown(cell) -> list[str]:
    """What a code cell showed on stdout and as results (text and Markdown), volatile parts replaced."""
    texts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            texts.append(o["text"])
        for kind in ("text/plain", "text/markdown"):
            if kind in o.get("data", {}) and WIDGET not in o["data"]:
                texts.append(o["data"][kind])
    joined = "".join(texts)
    for pattern, replacement in _VOLATILE:
        joined = pattern.sub(replacement, joined)
    return joined.splitlines()


def comparable(notebook) -> dict[int, list[str]]:
    """Cell number -> what it showed, for the code cells that need no LM."""
    return {i: shown(c) for i, c in enumerate(notebook.cells) if c.cell_type == "code" and not is_lm_cell(c)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="save the fresh outputs into the notebook")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        notebook = execute(cwd=cwd)
    saved = nbformat.read(NOTEBOOK, as_version=4)
    stale = comparable(notebook) != comparable(saved)
    if args.write:
        nbformat.write(notebook, NOTEBOOK)
        lm = os.environ.get("DEEPRESEARCH_LM") or "none (LM sections skipped)"
        print(f"wrote the outputs of {NOTEBOOK.name} (LM: {lm})")
        return 0
    print(f"{NOTEBOOK.name}: saved outputs are {'stale' if stale else 'current'}")
    return int(stale)


if __name__ == "__main__":
    raise SystemExit(main())
