"""The wheel's licence metadata and data files, built without a warning from our packaging."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_the_licences_and_the_embedded_corpus_and_builds_quietly(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout + done.stderr  # -v: what the build backend printed
    for banner in (
        "SetuptoolsDeprecationWarning",
        "License classifiers are deprecated",
        "Package would be ignored",
        "is absent from the `packages` configuration",
    ):
        assert banner not in printed, printed[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert archive.read(licence).decode() == (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()
    corpus = "deepresearch/retrievers/embedded-corpora/scifact/"
    assert {corpus + f for f in ("corpus.jsonl.gz", "queries.jsonl", "qrels/test.tsv", "ATTRIBUTION.md")} <= names
