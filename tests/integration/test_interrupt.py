"""`deepresearch run` under signals, over real HTTP to a local server: SIGINT and SIGTERM write the report
of what exists and exit 130 / 143; `--resume` then researches only what the journal does not hold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepresearch import cli
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler
from tests.scripted import inputs_of

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "omega-3 and heart disease"

pytestmark = pytest.mark.usefixtures("clean_lm_env")


def run_args(server, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        QUESTION,
        "--corpus",
        "scifact",
        "--depth",
        "2",
        "--breadth",
        "3",
        "--workers",
        "1",
        "--lm",
        "openai/local",
        "--api-base",
        server.base_url,
        "--no-cache",
        "--no-preflight",
        "-q",
        "--out",
        str(out),
        *extra,
    ]


def finished_nodes(out: Path) -> dict[str, str]:
    """node id -> query of the nodes the journal holds (a line cut by a kill is skipped)."""
    done = {}
    path = out / "journal.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("kind") == "node":
            done[entry["node"]["node_id"]] = entry["node"]["query"]
    return done


def interrupt_after(server, out: Path, sig: signal.Signals, nodes: int) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepresearch.cli", *run_args(server, out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and len(finished_nodes(out)) < nodes:
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before the signal: {proc.stderr.read()[-2000:]}"
    # the trace is current while the run works: valid JSON, marked running, holding the finished nodes
    trace = json.loads((out / "trace.json").read_text())
    assert trace["status"] == "running" and trace["question"] == QUESTION and trace["tree"]
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_writes_the_partial_report_and_resume_finishes_the_run(tmp_path, sig, code):
    out = tmp_path / "run"
    with LocalOpenAIServer(research_handler(), delay=0.15) as server:
        done = interrupt_after(server, out, sig, nodes=2)
        assert done.returncode == code, done.stderr[-2000:]
        assert f"{sig.name} received" in done.stderr and "continue it with --resume" in done.stderr
        report = (out / "report.md").read_text()
        assert report.startswith(f"# Research interrupted: interrupted by {sig.name}") and "## References" in report
        trace = json.loads((out / "trace.json").read_text())
        assert trace["status"] == "interrupted" and trace["stats"]["stopped"] == f"interrupted by {sig.name}"
        assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
        finished = finished_nodes(out)
        assert len(finished) >= 2

        asked_before = len(server.requests)
        assert cli.main(run_args(server, out, "--resume")) == 0
        resumed = server.requests[asked_before:]
    trace = json.loads((out / "trace.json").read_text())
    assert trace["status"] == "done" and trace["stats"]["resumed_nodes"] == len(finished)
    assert trace["stats"]["nodes"] == 3 + 3 * 2 and not (out / "report.md").read_text().startswith("# Research")
    # the resumed run asked the server nothing about a finished node's task
    asked = [inputs_of(r["messages"]) for r in resumed if len(r["messages"]) > 1]
    tasks = [json.loads(a["task"])["query"] for a in asked if "task" in a]
    assert tasks and not set(tasks) & set(finished.values())


def test_resume_and_overwrite_together_are_refused(tmp_path, capsys):
    assert cli.main(["run", QUESTION, "--corpus", "scifact", "--out", str(tmp_path), "--resume", "--overwrite"]) == 2
    assert "pass one of them" in capsys.readouterr().err
