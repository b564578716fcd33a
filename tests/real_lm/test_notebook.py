"""examples/research_scifact.ipynb runs headless, cell by cell, against the real local model; any error fails."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "research_scifact.ipynb"


def _texts(cell) -> list[str]:
    """Everything a code cell showed, one string each: streams, and the text and Markdown of its results."""
    out = []
    for o in cell.get("outputs", []):
        out += [o["text"]] if "text" in o else []
        out += [o["data"][kind] for kind in ("text/plain", "text/markdown") if kind in o.get("data", {})]
    return out


def test_the_example_notebook_runs_against_the_real_model(llama_server, data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))  # the kernel inherits this process's environment
    monkeypatch.setenv("DEEPRESEARCH_LM", "openai/smollm2")
    monkeypatch.setenv("DEEPRESEARCH_API_BASE", llama_server.base_url)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    shown = [_texts(c) for c in notebook.cells if c.cell_type == "code"]
    everything = [text for texts in shown for text in texts]
    report = next(t for t in everything if "## References" in t)  # the report rendered as Markdown
    assert "**Tree**" in report and "**Cost** 0 LM calls" in report
    # `import deepresearch` in the kernel registered the views: the report also shows as its HTML page
    html = [
        o["data"]["text/html"] for c in notebook.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})
    ]
    assert any("dr-embedded" in h and "dr-cite" in h for h in html)
    assert any(t.startswith("ResultPrediction(report=Report(") and "\n" not in t for t in everything)  # short
    printed = "\n".join(everything)
    assert "| before |" in printed and "| after (BootstrapFewShot) |" in printed
    assert int(re.search(r"^(\d+) LM calls to compile$", printed, re.M).group(1)) == 0  # the offline twins taught
    assert int(re.search(r"^(\d+) LM calls$", printed, re.M).group(1)) > 0  # the gatherer really asked the model
    assert int(re.search(r"(\d+) demos after loading", "".join(shown[-1])).group(1)) > 0
