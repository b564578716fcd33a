"""Index builds take the folder's lock like runs, and a run folder and an index folder are never mixed
(issue 30, item 5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from deepresearch.cli import main
from deepresearch.programs.runtime.outputs import LOCK_FILE


def test_two_index_builds_into_one_folder_one_wins_and_the_other_is_refused(tmp_path, data_dir):
    out = tmp_path / "index"
    corpus = data_dir / "scifact" / "corpus.jsonl"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "deepresearch.cli", "index", str(corpus), "--out", str(out)]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / LOCK_FILE).exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (out / LOCK_FILE).exists(), "the first build never took the lock"
    # paused while it holds the lock, the first build cannot finish before the second starts (which made the
    # test a race on a fast machine); it goes on once the second is refused
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    first_out, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err[-2000:]
    assert second.returncode == 2 and "another index build is writing to" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corpus"]["documents"] == 5183  # one corpus, whole
    assert not (out / LOCK_FILE).exists()


def test_index_refuses_a_run_folder_and_run_refuses_an_index_folder(tmp_path, capfd, clean_lm_env, scifact_head):
    run_folder, index_folder = tmp_path / "run", tmp_path / "index"
    question = "omega-3 and heart disease"
    assert (
        main(
            [
                "-q",
                "run",
                question,
                "--corpus",
                str(scifact_head(200)),
                "--lm",
                "offline",
                "--depth",
                "1",
                "--out",
                str(run_folder),
            ]
        )
        == 0
    )
    capfd.readouterr()
    assert main(["index", str(scifact_head(200)), "--out", str(run_folder)]) == 2
    err = capfd.readouterr().err
    assert "holds a research run" in err and len(err.strip().splitlines()) == 1
    assert not (run_folder / "manifest.json").exists() and not (run_folder / "bm25").exists()
    assert main(["index", str(scifact_head(200)), "--out", str(index_folder)]) == 0
    capfd.readouterr()
    assert (
        main(["-q", "run", question, "--corpus", str(scifact_head(200)), "--lm", "offline", "--out", str(index_folder)])
        == 2
    )
    err = capfd.readouterr().err
    assert "holds an index" in err and "--index" in err
    assert not (index_folder / "run.json").exists()
