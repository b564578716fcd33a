"""examples/research_scifact.ipynb on a fresh install: no data folder, no LM, no network; its saved outputs
are those the code gives today. (tests/real_lm/test_notebook.py runs it against a real model.)"""

from __future__ import annotations

import nbformat
import pytest

from tests.notebook_outputs import LM_SKIPPED, NOTEBOOK, comparable, execute, is_lm_cell, shown


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for name in ("DEEPRESEARCH_DATA", "DEEPRESEARCH_LM", "DEEPRESEARCH_API_BASE"):  # the kernel inherits these
        mp.delenv(name, raising=False)
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        yield execute(cwd=tmp_path_factory.mktemp("notebook"))
    finally:
        mp.undo()


def test_the_notebook_runs_without_a_data_folder_or_an_lm(fresh):
    offline = comparable(fresh)
    assert offline[min(offline)] == ["5183 SciFact abstracts"]  # the embedded corpus
    report = next(line for lines in offline.values() for line in lines if line.startswith("**Cost**"))
    assert "0 LM calls" in report and "offline" in report
    lm_cells = [shown(c) for c in fresh.cells if is_lm_cell(c)]
    assert len(lm_cells) == 3 and lm_cells[0] == [next(x for x in lm_cells[0] if x.startswith(LM_SKIPPED))]
    assert lm_cells[1:] == [[], []]  # one line says how to enable them, once


def test_the_saved_outputs_are_current(fresh):
    saved = nbformat.read(NOTEBOOK, as_version=4)
    assert all(c.outputs for c in saved.cells if c.cell_type == "code" and not is_lm_cell(c)), (
        "the notebook is saved without outputs; run .venv/bin/python -m tests.notebook_outputs --write"
    )
    assert comparable(saved) == comparable(fresh), (
        "the notebook's saved outputs are stale; run .venv/bin/python -m tests.notebook_outputs --write"
    )
