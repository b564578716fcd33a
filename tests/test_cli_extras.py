"""A run that needs an extra the install lacks stops before any work, with one line naming the extra.

Each case runs the real command in a subprocess where the extra's modules cannot be imported: a finder on
sys.meta_path refuses them, as on an install without the extra. Nothing of ours is replaced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deepresearch.retrievers.extras import install_hint
from tests.pdfgen import make_pdf

BLOCKED = {
    "dense": ["torch", "sentence_transformers"],
    "pdf": ["pypdf"],
    "refs": ["bibtexparser"],
    "hf": ["datasets"],
    "qdrant": ["qdrant_client"],
}

RUNNER = textwrap.dedent("""
    import sys

    BLOCKED = set(sys.argv[1].split(",")) - {""}

    class Blocker:  # the import boundary: these modules are not installed here
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    from deepresearch.cli import main

    sys.exit(main(sys.argv[2:]))
""")

BIB = """@article{lopez2021,
  title = {Obesity and the risk of type 2 diabetes},
  author = {Lopez, Ana},
  year = {2021},
  abstract = {A cohort study of obesity and incident type 2 diabetes.}
}
"""


def run(tmp_path: Path, blocked: list[str], *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DEEPRESEARCH_LM"}
    env.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    return subprocess.run(
        [sys.executable, "-c", RUNNER, ",".join(blocked), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_one_line_before_any_work(done: subprocess.CompletedProcess, extra: str, out: Path) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (error,) = [line for line in lines if "error" in line]
    assert f"needs the {extra!r} extra" in error and error.endswith(install_hint(extra))
    assert not (out / "trace.json").exists() and not (out / "report.md").exists()  # nothing was researched


@pytest.fixture
def pdf_folder(tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "obesity.pdf").write_bytes(
        make_pdf([["Obesity and diabetes", "Obesity raises the risk of type 2 diabetes in adults."]])
    )
    return folder


@pytest.mark.parametrize("case", ["pdf-folder", "bib", "taxonomy", "hf", "qdrant", "dense", "hero", "full-text"])
def test_a_missing_extra_is_one_line_before_the_run_starts(tmp_path, pdf_folder, case):
    (tmp_path / "refs.bib").write_text(BIB)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"_id": "a", "title": "T", "text": "obesity"}) + "\n")
    corpus = {"pdf-folder": str(pdf_folder), "bib": "refs.bib", "hf": "hf:rows.jsonl"}.get(case, "scifact")
    extra = {"pdf-folder": "pdf", "bib": "refs", "hf": "hf", "qdrant": "qdrant", "full-text": "pdf"}.get(case, "dense")
    options = {
        "taxonomy": ["--taxonomy"],
        "qdrant": ["--retriever", "qdrant", "--qdrant-mode", "bm25"],
        "dense": ["--retriever", "hybrid"],
        "hero": ["--preset", "hero"],
        "full-text": ["--full-text"],
    }.get(case, [])
    done = run(
        tmp_path, BLOCKED[extra], "run", "Does obesity cause diabetes?", "--corpus", corpus, "--out", "out", *options
    )
    assert_one_line_before_any_work(done, extra, tmp_path / "out")


def test_every_missing_extra_is_named_in_the_same_line(tmp_path, pdf_folder):
    done = run(
        tmp_path,
        BLOCKED["pdf"] + BLOCKED["dense"],
        "run",
        "Does obesity cause diabetes?",
        "--corpus",
        str(pdf_folder),
        "--taxonomy",
        "--out",
        "out",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(install_hint("pdf,dense"))


def test_indexing_a_pdf_folder_without_the_extra_is_one_line(tmp_path, pdf_folder):
    done = run(tmp_path, BLOCKED["pdf"], "index", str(pdf_folder), "--out", "idx")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].endswith(f"reading PDFs needs the 'pdf' extra: {install_hint('pdf')}")


def test_with_the_extra_installed_the_same_run_writes_its_report(tmp_path):
    (tmp_path / "refs.bib").write_text(BIB)
    done = run(
        tmp_path, [], "run", "Does obesity cause diabetes?", "--corpus", "refs.bib", "--out", "out", "--preset", "quick"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "lopez2021" in (tmp_path / "out" / "trace.json").read_text()
