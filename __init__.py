"""dspy-deepresearch: a DSPy program for scientific deep research.

The names users reach for first, all importable from the top:

    import deepresearch as dr

    program = dr.DeepResearch(retriever=dr.open_retriever("scifact").retriever, depth=2, breadth=3,
                              offline=True)  # offline: no LM; see dspy.configure(lm=...)
    report = program(question="Does obesity increase the risk of type 2 diabetes?").report

- The program: `DeepResearch`, its settings `ResearchConfig`, `preset(name, **overrides)` and `PRESETS`;
  a run returns a `Report`; `on_event=Progress()` shows its progress (a bar, in a notebook a widget).
- Corpora: `open_corpus` (a name such as `scifact`, a file, a folder, `hf:NAME`), `load_corpus` (a JSONL
  file or BEIR folder), `Corpus`, `Doc`, `Hit`.
- Retrievers: `open_retriever` (what the command line's `--corpus`, `--index` and `--retriever` open),
  `BM25Retriever`, `DenseRetriever`, `HybridRetriever`, `QdrantRetriever`; persistent indexes with
  `build_index` and `open_index`.
- DSPy's own compile: `examples(name, split, limit)` gives a benchmark's questions as `dspy.Example`s,
  `metrics` holds DSPy metrics (`metrics.gather_f1`, `metrics.cited_recall`, ...), `Gatherer` is the
  gathering program; `program.offline()` is the teacher: `dspy.BootstrapFewShot(metric=...).compile(program,
  teacher=program.offline(), trainset=train)`; `choose_twins` keeps, per stage, the LM or its offline twin;
  `with one_run_per_example():` keeps DSPy's `Evaluate` from running a slow example twice.
- Compiling: `compile_program` tunes a program with a DSPy optimizer against a metric (`metric_spec`),
  `save_compiled` and `load_compiled` write and read it with its metadata; `DeepResearch(...).load(path)`
  loads a saved program too.

Each name is imported when first used (PEP 562), so `import deepresearch` loads neither DSPy nor numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it. Nothing is imported until a name is used.
_EXPORTS = {
    "DeepResearch": "deepresearch.programs.research.program",
    "ResearchConfig": "deepresearch.programs.config",
    "preset": "deepresearch.programs.config",
    "PRESETS": "deepresearch.programs.config",
    "Report": "deepresearch.programs.artifacts",
    "Progress": "deepresearch.programs.runtime.progress",
    "open_corpus": "deepresearch.retrievers.sources",
    "load_corpus": "deepresearch.retrievers.corpus",
    "Corpus": "deepresearch.retrievers.corpus",
    "Doc": "deepresearch.retrievers.types",
    "Hit": "deepresearch.retrievers.types",
    "open_retriever": "deepresearch.retrievers.open",
    "BM25Retriever": "deepresearch.retrievers.bm25",
    "DenseRetriever": "deepresearch.retrievers.dense",
    "HybridRetriever": "deepresearch.retrievers.hybrid",
    "QdrantRetriever": "deepresearch.retrievers.qdrant",
    "build_index": "deepresearch.retrievers.index",
    "open_index": "deepresearch.retrievers.index",
    "compile_program": "deepresearch.optimize.compile",
    "metric_spec": "deepresearch.optimize.metrics",
    "save_compiled": "deepresearch.optimize.saved",
    "load_compiled": "deepresearch.optimize.saved",
    "Gatherer": "deepresearch.programs.gather.loop",
    "GatherConfig": "deepresearch.programs.gather.loop",
    "examples": "deepresearch.optimize.trainsets",
    "choose_twins": "deepresearch.programs.stages.choice",
    "one_run_per_example": "deepresearch.programs.runtime.executor",
}
# name -> a module exported whole: `dr.metrics.gather_f1` and the other DSPy metrics, (example, prediction, trace=None)
_MODULES = {"metrics": "deepresearch.optimize.metrics"}

__all__ = sorted([*_EXPORTS, *_MODULES])

if TYPE_CHECKING:  # for type checkers, IDEs and the API reference; at run time __getattr__ imports on use
    from deepresearch.optimize import metrics
    from deepresearch.optimize.compile import compile_program
    from deepresearch.optimize.metrics import metric_spec
    from deepresearch.optimize.saved import load_compiled, save_compiled
    from deepresearch.optimize.trainsets import examples
    from deepresearch.programs.artifacts import Report
    from deepresearch.programs.config import PRESETS, ResearchConfig, preset
    from deepresearch.programs.gather.loop import GatherConfig, Gatherer
    from deepresearch.programs.research.program import DeepResearch
    from deepresearch.programs.runtime.executor import one_run_per_example
    from deepresearch.programs.runtime.progress import Progress
    from deepresearch.programs.stages.choice import choose_twins
    from deepresearch.retrievers.bm25 import BM25Retriever
    from deepresearch.retrievers.corpus import Corpus, load_corpus
    from deepresearch.retrievers.dense import DenseRetriever
    from deepresearch.retrievers.hybrid import HybridRetriever
    from deepresearch.retrievers.index import build_index, open_index
    from deepresearch.retrievers.open import open_retriever
    from deepresearch.retrievers.qdrant import QdrantRetriever
    from deepresearch.retrievers.sources import open_corpus
    from deepresearch.retrievers.types import Doc, Hit


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'deepresearch' has no attribute {name!r}")
    globals()[name] = value  # the next lookup finds it without calling here
    return value


def __dir__() -> list[str]:
    return sorted(__all__)  # the public API only: not the names this module uses to import it


def _show_in_notebooks() -> None:
    """Inside IPython (a notebook, a console), results show through our views (`programs/notebook.py`)."""
    import sys

    if "IPython" in sys.modules:
        from deepresearch.programs.notebook import register  # lazy: start-up

        register()


_show_in_notebooks()
