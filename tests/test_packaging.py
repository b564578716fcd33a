"""The install: one `deepresearch` namespace over the repository's folders, and no import around it; the
wheel `python -m build` makes carries what the package reads and runs offline wherever it is installed."""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("signatures", "retrievers", "programs", "eval", "optimize", "cli")
OURS = set(FOLDERS)


def _packages_on_disk() -> set[str]:
    return {"deepresearch"} | {
        "deepresearch." + ".".join(p.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for p in (ROOT / folder).rglob("__init__.py")
    }


def test_every_package_folder_is_listed_for_the_install():
    # an editable install finds any folder; a wheel holds only the listed ones, so a new subpackage
    # left out of pyproject.toml would be missing from a real install and nowhere else
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(setuptools["packages"]) == _packages_on_disk()
    assert setuptools["package-dir"] == {"deepresearch": "."} and "py-modules" not in setuptools


def _imports(source: str) -> list[str]:
    """Top-level names a piece of Python imports (absolute imports only)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return names


def test_nothing_imports_our_folders_by_their_bare_names():
    # from the repository root `import programs` would still work and load a second copy of every module
    files = [p for folder in (*FOLDERS, "tests", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    bare = {str(p.relative_to(ROOT)): sorted(set(_imports(p.read_text())) & OURS) for p in files}
    for notebook in (ROOT / "examples").glob("*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        bare[str(notebook.relative_to(ROOT))] = sorted(set(_imports(code)) & OURS)
    assert len(files) > 150
    assert {name: found for name, found in bare.items() if found} == {}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """What `python -m build` makes of the clone: the sdist, and the wheel built from that sdist (so a file the
    sdist leaves out is missing from the wheel too). --no-isolation builds with this environment's setuptools,
    offline."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    return out


# the files besides Python modules that the package reads at run time
DATA = {
    "deepresearch/eval/eco_vocab.json",  # eval/eco.py
    "deepresearch/programs/report_view.html.j2",  # programs/report_view.py, the HTML report view
    "deepresearch/programs/report_view.css",
    "deepresearch/programs/report_view.js",
    *(  # retrievers/sources.py: the embedded SciFact corpus and its attribution
        f"deepresearch/retrievers/embedded-corpora/scifact/{name}"
        for name in ("corpus.jsonl.gz", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv", "ATTRIBUTION.md")
    ),
}


def test_the_wheel_installs_everything_under_deepresearch(dist):
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    code = [n for n in names if not n.startswith("dspy_deepresearch-")]
    assert code and all(n.startswith("deepresearch/") for n in code), sorted({n.split("/")[0] for n in code})
    assert {"deepresearch/cli/__init__.py", "deepresearch/programs/research/program.py"} <= set(names)
    # the data the package reads and nothing else: no tests, docs, benchmarks, examples, runs or environment
    assert {n for n in code if not n.endswith(".py")} == DATA
    assert {n.removeprefix("deepresearch/") for n in code if n.endswith(".py")} == {
        str(p.relative_to(ROOT)) for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
    } | {"__init__.py"}
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "deepresearch = deepresearch.cli:run_command" in zipfile.ZipFile(wheel).read(entry).decode()


CHECK_IMPORT = """
import json
import sys

import deepresearch as dr
from deepresearch.retrievers.extras import MissingExtra, require

retrieval = dr.open_retriever("scifact")
hits = retrieval.retriever.search("obesity and type 2 diabetes", k=3)
examples = dr.examples("scifact", "train", limit=3)
sys.modules["pypdf"] = None  # as on an install without the pdf extra
try:
    require("pypdf", "pdf", "reading PDFs")
except MissingExtra as err:
    missing = str(err)
loaded = sorted({m.__file__ for name, m in sys.modules.items() if name.split(".")[0] == "deepresearch"})
found = {"documents": len(retrieval.corpus), "hits": len(hits), "examples": len(examples)}
print(json.dumps({**found, "missing": missing, "loaded": loaded}))
"""


def test_the_installed_wheel_researches_offline_from_any_folder(dist, tmp_path):
    """The wheel installed outside the clone: `deepresearch run` and `import deepresearch` work from another
    folder, with no LM, no data folder and no network, on the SciFact corpus the wheel carries."""
    (wheel,) = dist.glob("*.whl")
    target, elsewhere = tmp_path / "site-packages", tmp_path / "elsewhere"
    elsewhere.mkdir()
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
    done = subprocess.run([*install, str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    # nothing from this environment points at an LM, a data folder or a cache; the clone is not on the path
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPRESEARCH_")}
    env.update(PYTHONPATH=str(target), HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")

    def python(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, *args], cwd=elsewhere, env=env, capture_output=True, text=True)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return done

    found = json.loads(python("-c", CHECK_IMPORT).stdout.splitlines()[-1])
    assert found["loaded"] and all(Path(f).is_relative_to(target / "deepresearch") for f in found["loaded"])
    assert found["documents"] == 5183 and found["hits"] == 3 and found["examples"] == 3
    # installed from a wheel, the command to install an extra names the distribution (not the clone)
    assert found["missing"] == "reading PDFs needs the 'pdf' extra: pip install 'dspy-deepresearch[pdf]'"

    # the console script pip wrote, as a user's shell runs it
    python(str(target / "bin" / "deepresearch"), "run", "Does obesity increase the risk of type 2 diabetes?")
    (run,) = (elsewhere / "runs").iterdir()
    trace = json.loads((run / "trace.json").read_text())
    assert trace["corpus"]["name"] == "scifact" and trace["corpus"]["documents"] == 5183
    with gzip.open(target / "deepresearch/retrievers/embedded-corpora/scifact/corpus.jsonl.gz", "rt") as f:
        corpus = {json.loads(line)["_id"] for line in f}
    cited = re.findall(r"^\[\d+\] .* doc (\S+)$", (run / "report.md").read_text(), re.M)
    assert cited and set(cited) <= corpus
