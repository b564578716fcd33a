"""The install: one `deepresearch` namespace over the repository's folders, and no import around it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("signatures", "retrievers", "programs", "eval", "optimize")
OURS = {*FOLDERS, "cli"}


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
    assert setuptools["package-dir"] == {"deepresearch": "."} and setuptools["py-modules"] == ["deepresearch.cli"]


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
    files.append(ROOT / "cli.py")
    bare = {str(p.relative_to(ROOT)): sorted(set(_imports(p.read_text())) & OURS) for p in files}
    for notebook in (ROOT / "examples").glob("*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        bare[str(notebook.relative_to(ROOT))] = sorted(set(_imports(code)) & OURS)
    assert len(files) > 150
    assert {name: found for name, found in bare.items() if found} == {}


def test_the_wheel_installs_everything_under_deepresearch(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    code = [n for n in names if not n.startswith("dspy_deepresearch-")]
    assert code and all(n.startswith("deepresearch/") for n in code), sorted({n.split("/")[0] for n in code})
    assert {
        "deepresearch/cli.py",
        "deepresearch/programs/research/program.py",
        "deepresearch/eval/eco_vocab.json",
        "deepresearch/programs/report_view.html.j2",
        "deepresearch/programs/report_view.css",
        "deepresearch/programs/report_view.js",
    } <= set(names)
    assert not any(n.startswith(("deepresearch/tests/", "deepresearch/benchmarks/")) for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "deepresearch = deepresearch.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
