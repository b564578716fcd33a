"""Results in a notebook: short reprs, Markdown with clickable references, the tree and the cost; load chains;
the notebook progress bar; one-line errors for a missing extra."""

import dataclasses
import io
import re
import subprocess
import sys
import types
from pathlib import Path

import dspy
import pytest

from deepresearch.programs.artifacts import Reference, Report
from deepresearch.programs.config import preset
from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.prediction import ResultPrediction
from deepresearch.programs.render import linked_citations
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.runtime import progress
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from deepresearch.retrievers.extras import MissingExtra, install_hint, require
from tests.notebook_views import shown

QUESTION = "Does obesity increase the risk of type 2 diabetes?"


@pytest.fixture(scope="module")
def offline_run(scifact_bm25):
    return DeepResearch(retriever=scifact_bm25, depth=2, breadth=2, offline=True)(QUESTION)


def test_the_prediction_and_report_reprs_are_short(offline_run):
    full = dspy.Prediction(**offline_run.toDict())
    assert len(repr(full)) > 20_000  # what a notebook showed before: every field in full
    assert isinstance(offline_run, ResultPrediction) and isinstance(offline_run, dspy.Prediction)
    assert len(repr(offline_run)) < 2_000 and "\n" not in repr(offline_run)
    report = offline_run.report
    nodes = len(report.nodes())
    assert repr(report) == (
        f"Report({QUESTION!r}, status=done, {len(report.references)} references, "
        f"{len(report.learnings)} learnings, {nodes} nodes, 0 LM calls)"
    )


def test_the_report_renders_with_its_tree_and_cost(offline_run):
    report = offline_run.report
    md = shown(report)
    assert shown(offline_run) == md
    body = report.markdown.partition("## References")[0].rstrip()
    assert md.startswith(body)  # SciFact has no links: the body is unchanged
    for ref in report.references:
        assert f"[{ref.number}] " in md
    lines = [line for line in md.splitlines() if line.lstrip().startswith("- `")]
    assert len(lines) == len(report.nodes())  # one line per node of the tree
    assert any(line.startswith("  - `1.1`") for line in lines)  # children indented under their parent
    assert f"{report.stats.searches} searches" in md and "0 LM calls" in md and "offline" in md


def test_citations_and_references_with_a_link_are_clickable(offline_run):
    first, second = offline_run.report.references[:2]
    with_doi = dataclasses.replace(first, doi="10.1000/xyz")
    with_url = dataclasses.replace(second, url="https://example.org/p")
    report = dataclasses.replace(
        offline_run.report, references=(with_doi, with_url, *offline_run.report.references[2:])
    )
    md = shown(report)
    assert "[[1](https://doi.org/10.1000/xyz)]" in md and "[[2](https://example.org/p)]" in md
    assert "[https://doi.org/10.1000/xyz](https://doi.org/10.1000/xyz)" in md
    assert "[[3](" not in md and "[3]" in md  # a corpus document without a link stays plain


def test_a_citation_list_links_each_number_that_has_a_url():
    refs = (Reference(1, "s1", "d1", "A", url="https://a"), Reference(2, "s2", "d2", "B"))
    assert linked_citations("x [1, 2]. y [2].", refs) == "x [[1](https://a), 2]. y [2]."


def test_the_gathering_result_renders(scifact_bm25):
    out = DeepResearch(retriever=scifact_bm25, config=preset("gather"), offline=True)(QUESTION)
    result = GatherResult.from_dict(out.report.gathered)
    text = repr(result)
    assert text.startswith("GatherResult(") and len(text) < 300
    assert f"{len(result.rounds)} rounds" in text and f"{len(result.selected)} selected" in text
    md = shown(result)
    assert md.count("- round ") == len(result.tree) + len(result.rounds)
    assert f"{len(result.selected)} papers selected" in md


def test_the_taxonomy_renders_as_a_tree(data_dir):
    import json

    with open(data_dir / "taxobench_examples" / "data_subset.jsonl", encoding="utf-8") as f:
        survey = json.loads(f.readline())
    out = TaxonomyBuilder(offline=True)(topic="Test topic", papers=survey["pdfs"][:12])
    assert isinstance(out, ResultPrediction) and len(repr(out)) < 2_000
    md = shown(out)
    assert md.startswith("- **Test topic**")
    leaves = []

    def walk(node):
        leaves.extend([node] if node.get("papers") else [])
        for child in node.get("subtopics") or []:
            walk(child)

    walk(out.tree)
    assert len(re.findall(r"\(\d+ papers\)", md)) == len(leaves)


def test_load_returns_the_program(scifact_bm25, tmp_path):
    program = DeepResearch(retriever=scifact_bm25)
    program.save(tmp_path / "p.json")
    loaded = DeepResearch(retriever=scifact_bm25).load(tmp_path / "p.json")
    assert isinstance(loaded, DeepResearch)
    assert loaded.dump_state() == program.dump_state()


def test_a_notebook_gets_the_widget_bar_only_with_ipywidgets(monkeypatch):
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert progress.choose_display(io.StringIO()) == "notebook"
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # find_spec then raises ValueError; treat as missing
    real = progress.importlib.util.find_spec
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda n: None if n == "ipywidgets" else real(n))
    assert progress.choose_display(io.StringIO()) == "lines"  # tqdm would warn and draw a text bar


@pytest.mark.parametrize(
    "module,extra,call",
    [
        (
            "sentence_transformers",
            "dense",
            lambda: __import__("deepresearch.retrievers.embed", fromlist=["x"]).load_encoder("m"),
        ),
        ("datasets", "hf", lambda: __import__("deepresearch.retrievers.hf", fromlist=["x"]).load_hf_corpus("x/y")),
        (
            "qdrant_client",
            "qdrant",
            lambda: __import__("deepresearch.retrievers.qdrant", fromlist=["x"]).QdrantRetriever(None, path=":memory:"),
        ),
        (
            "matplotlib",
            "plots",
            lambda: __import__("deepresearch.eval.run_reports", fromlist=["x"]).write_heatmap([], "m", "x.png"),
        ),
        ("datasets", "hf", lambda: __import__("deepresearch.eval.questions", fromlist=["x"]).load_hf_questions("x/y")),
        ("datasets", "hf", lambda: __import__("deepresearch.eval.taxobench", fromlist=["x"])._load_hub("x/y")),
    ],
)
def test_a_missing_extra_is_named_in_one_line(module, extra, call, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    from deepresearch.retrievers import embed

    embed.load_encoder.cache_clear()
    with pytest.raises(MissingExtra) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and message.endswith(f"needs the {extra!r} extra: {install_hint(extra)}")


def test_from_a_clone_the_install_command_installs_the_clone_with_the_extra():
    # the package is not on PyPI, so a clone's command names the clone (an absolute path: it works from any
    # folder); installed from a wheel it names the distribution (tests/test_packaging.py)
    root = Path(__file__).resolve().parents[1]
    assert install_hint("pdf") == f"pip install -e '{root}[pdf]'"
    with pytest.raises(MissingExtra, match=re.escape(f"needs the 'hf' extra: pip install -e '{root}[hf]'")):
        require("not_a_module_anywhere", "hf")


def test_require_names_an_unknown_extra():
    assert require("json", "hf").__name__ == "json"
    with pytest.raises(ValueError, match="unknown extra 'gpu'; choose one of: dense, hf"):
        require("json", "gpu")


def test_the_stop_words_are_scikit_learns():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from deepresearch.retrievers.stopwords import ENGLISH_STOP_WORDS as ours

    assert ours == ENGLISH_STOP_WORDS and len(ours) == 318


def test_report_round_trips_through_json_unchanged_by_rendering(offline_run):
    report = offline_run.report
    assert Report.from_dict(report.to_dict()).markdown == report.markdown


def test_import_inside_ipython_registers_the_views():
    # a fresh interpreter, as a notebook kernel is: IPython runs first, then the user imports the package
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "import deepresearch\n"
        "f = shell.display_formatter.formatters\n"
        "print(sorted(name for mime in ('text/html', 'text/markdown') for _, name in f[mime].deferred_printers))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[0] == str(
        sorted(["Report", "ResultPrediction", "GatherResult", "Report", "ResultPrediction"])
    ), out.stdout
