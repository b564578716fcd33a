"""`deepresearch optimize --workers 2` stops when told: SIGINT and SIGTERM end it within seconds, exit 130 / 143,
no LM request reaches the server after them beyond those in flight, no process is left, and what was done is kept
so that the same command resumes it and ends as a run never interrupted does (issue "Stop means stop, failed
means failed").

Real processes and signals, over real HTTP to the scripted local OpenAI-compatible server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepresearch import cli
from tests.faults.test_batch_stop import ENV, alive, children
from tests.integration.openai_server import LocalOpenAIServer
from tests.optimize.test_resume import program_and_figures
from tests.research_lm import research_handler

WORKERS = 2
BREADTH = 2  # each example's research runs its branches at once: a worker has up to this many requests in flight
LM_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "DEEPRESEARCH_API_KEY", "DEEPRESEARCH_LM")

pytestmark = pytest.mark.usefixtures("clean_lm_env")


def command(data_dir: Path, out: Path, base_url: str) -> list[str]:
    """The whole research program tuned on 8 SciFact claims (6 train, 2 dev), on two worker threads."""
    return [
        *("optimize", "--program", "research", "--metric", "recall", "--optimizer", "bootstrap-rs"),
        *("--data", str(data_dir / "scifact"), "--limit", "8", "--budget", "16", "--workers", str(WORKERS)),
        *("--depth", "1", "--breadth", str(BREADTH), "--out", str(out)),
        *("--lm", "openai/local", "--api-base", base_url, "--no-cache", "--no-preflight"),
    ]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data_dir):
    """The program and figures of the run never interrupted."""
    out = tmp_path_factory.mktemp("whole") / "compiled.json"
    with pytest.MonkeyPatch.context() as env, LocalOpenAIServer(research_handler(), delay=0.02) as server:
        for name in LM_VARIABLES:
            env.delenv(name, raising=False)
        env.chdir(out.parent)
        assert cli.main(["-q", *command(data_dir, out, server.base_url)]) == 0
    return program_and_figures(out)


def dev_scores(work: Path) -> dict[int, float]:
    path = work / "dev_before.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {row["index"]: row["score"] for row in map(json.loads, lines)}


@pytest.mark.parametrize(
    "sig,code,after",
    [
        (signal.SIGINT, 130, 4),  # during the dev evaluation before tuning
        (signal.SIGTERM, 143, 4),
        (signal.SIGTERM, 143, 40),  # while the optimizer tunes
    ],
)
def test_a_signal_stops_optimize_on_workers_at_once_and_the_rerun_ends_as_an_uninterrupted_run(
    tmp_path, data_dir, uninterrupted, sig, code, after
):
    out = tmp_path / "cut" / "compiled.json"
    env = {k: v for k, v in ENV.items() if k not in LM_VARIABLES}
    with LocalOpenAIServer(research_handler(), delay=0.3) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "deepresearch.cli", *command(data_dir, out, server.base_url)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 180
        while len(server.requests) < after and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"optimize ended before the signal: {proc.stderr.read()[-2000:]}"
        assert len(server.requests) >= after, "optimize never asked the LM"
        spawned = children(proc.pid)
        asked, sent = len(server.requests), time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
        assert time.monotonic() - sent < 15, "optimize took too long to stop"
        assert proc.returncode == code, stderr[-2000:]
        assert "Traceback" not in stderr, stderr[-2000:]
        work = out.with_suffix(".partial")
        assert f"rerun the same command to resume from {work}" in stderr
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in spawned) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in spawned), "a process outlived optimize"
        stopped = len(server.requests)
        time.sleep(1)
        assert len(server.requests) == stopped  # nothing after the exit
        assert stopped - asked <= WORKERS * BREADTH  # at most what the workers had in flight
        assert not out.exists() and (work / "manifest.json").exists()
        # a dev score journaled is one an uninterrupted run gets, never that of an example the stop cut short
        kept = dev_scores(work)
        before = uninterrupted[1]["before_scores"]
        assert all(score == before[i] for i, score in kept.items()), (kept, before)

        server.delay = 0.02  # the rerun need not be slow
        assert cli.main(["-q", *command(data_dir, out, server.base_url)]) == 0  # the same command again
    assert program_and_figures(out) == uninterrupted
    assert not work.exists()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_does_not_wait_for_the_replies_in_flight(tmp_path, data_dir, sig, code):
    # a model that takes its time (here: no reply within the 120 s a request may take): the command still
    # ends within seconds of the signal, not when its worker threads' requests time out
    out = tmp_path / "cut" / "compiled.json"
    env = {k: v for k, v in ENV.items() if k not in LM_VARIABLES}
    with LocalOpenAIServer(research_handler(), delay=lambda body: 600) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "deepresearch.cli", *command(data_dir, out, server.base_url), "--lm-timeout", "120"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while server.in_flight < WORKERS and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None and server.in_flight >= WORKERS, "optimize never had its requests in flight"
        sent = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=150)
        took = time.monotonic() - sent
    assert proc.returncode == code, stderr[-2000:]
    assert took < 15, f"optimize took {took:.0f} s to stop: it waited for the replies in flight"
    assert "Traceback" not in stderr, stderr[-2000:]
    # no reply came, so nothing is left to resume from: no folder, and no word of resuming
    assert not out.with_suffix(".partial").exists() and not out.exists(), stderr[-2000:]
    assert "resume from" not in stderr, stderr[-2000:]
