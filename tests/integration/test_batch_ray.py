"""`deepresearch batch --ray ADDRESS` on a real local Ray cluster that the test starts (`ray start --head`,
2 CPUs): the reports equal the local pool's (offline runs are deterministic), and a worker killed while
it runs a question loses no finished question, and the batch completes (Ray runs the task again, and it
resumes from its folder).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepresearch import cli
from tests.programs.test_batch import RUN, write_questions

QUESTIONS = [
    {"id": f"q{i}", "question": q}
    for i, q in enumerate(
        [
            "Does obesity increase the risk of type 2 diabetes?",
            "Do statins reduce cardiovascular mortality?",
            "Does vitamin D prevent fractures?",
            "Does smoking cause lung cancer?",
        ]
    )
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """HOST:PORT of a head node with 2 CPUs, stopped (with every process it started) after the module."""
    port = free_port()
    # Ray's CLI under this interpreter: its workers run the same Python, so they import this checkout
    # (a `ray` script copied with a virtualenv may name another one)
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    head = subprocess.Popen(
        [
            *ray,
            "start",
            "--head",
            "--block",
            "--num-cpus",
            "2",
            "--port",
            str(port),
            "--node-ip-address",
            "127.0.0.1",
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--object-store-memory",
            str(200 * 1024**2),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 300  # minutes when the machine is busy (the real-model tests run beside these)
    while subprocess.run([*ray, "status", "--address", address], capture_output=True).returncode != 0:
        assert head.poll() is None and time.time() < deadline, "ray start --head did not come up"
        time.sleep(1)
    yield address
    head.send_signal(signal.SIGTERM)  # --block: stops the processes it started
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def _env(monkeypatch, data_dir):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)


def reports(out: Path) -> dict[str, str]:
    return {q["id"]: (out / q["id"] / "report.md").read_text() for q in QUESTIONS}


def test_a_batch_on_ray_equals_the_local_run_and_survives_a_killed_worker(ray_cluster, tmp_path):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS)
    local = tmp_path / "local"
    assert cli.main(["batch", str(questions), "--out", str(local), "--workers", "2", "--", *RUN]) == 0

    out = tmp_path / "ray"
    env = {**os.environ, "RAY_ADDRESS": ""}
    batch = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from deepresearch import cli; sys.exit(cli.main(sys.argv[1:]))",
            "batch",
            str(questions),
            "--out",
            str(out),
            "--ray",
            ray_cluster,
            "--",
            *RUN,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # once a question has finished, kill the worker process running another one
    killed, finished_then, deadline = None, set(), time.time() + 600
    while killed is None and time.time() < deadline and batch.poll() is None:
        summary = out / "summary.jsonl"
        done = (
            {r["id"] for r in map(json.loads, summary.read_text().splitlines()) if r["status"] == "done"}
            if summary.exists()
            else set()
        )
        for q in QUESTIONS:
            record = out / q["id"] / "run.json"
            if done and q["id"] not in done and record.exists():
                run = json.loads(record.read_text())
                if run.get("status") == "running" and run.get("pid") not in (None, os.getpid(), batch.pid):
                    finished_then = set(done)
                    os.kill(run["pid"], signal.SIGKILL)
                    killed = q["id"]
                    break
        time.sleep(0.05)
    stdout, stderr = batch.communicate(timeout=900)
    assert killed is not None, "no question was running after the first finished: " + stderr[-2000:]
    assert batch.returncode == 0, stderr[-3000:]
    summary = {r["id"]: r for r in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert all(r["status"] == "done" for r in summary.values()), summary
    assert finished_then <= set(summary)
    assert "on ray (2 at once)" in stderr and "batch: 4 of 4 questions done" in stderr
    assert reports(out) == reports(local)  # the killed question too: run again and resumed, same report


def test_eval_gather_and_the_dev_evaluations_of_optimize_on_ray_equal_the_in_process_run(
    ray_cluster, data_dir, tmp_path, capsys
):
    """`eval gather --ray` and `optimize --ray` (its before/after dev scoring) against a scripted LM served over
    HTTP, which the cluster's workers reach: the same records, scores, compiled program and LM call count."""
    from tests.eval.test_gather_runner import gather, gather_lm_handler, records_without_timing, summary_without_timing
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    with LocalOpenAIServer(gather_lm_handler()) as server:
        lm = ["--lm", "openai/scripted", "--api-base", server.base_url, "--no-cache"]
        assert gather(data_dir, tmp_path / "here", *lm, limit=3) == 0
        assert gather(data_dir, tmp_path / "ray", "--ray", ray_cluster, *lm, limit=3) == 0
    assert "queries on ray (2 at once)" in capsys.readouterr().err
    assert records_without_timing(tmp_path / "ray") == records_without_timing(tmp_path / "here")
    assert summary_without_timing(tmp_path / "ray") == summary_without_timing(tmp_path / "here")

    metas, requests = {}, {}
    for where, extra in (("here", []), ("ray", ["--ray", ray_cluster])):
        out = tmp_path / f"{where}.json"
        with LocalOpenAIServer(research_handler()) as server:
            assert (
                cli.main(
                    [
                        "optimize",
                        "--program",
                        "research",
                        "--stage",
                        "all",
                        "--metric",
                        "recall",
                        "--optimizer",
                        "bootstrap-rs",
                        "--data",
                        str(data_dir / "scifact"),
                        "--limit",
                        "6",
                        "--budget",
                        "8",
                        "--workers",
                        "1",
                        "--out",
                        str(out),
                        "--lm",
                        "openai/local-model",
                        "--api-base",
                        server.base_url,
                        "--no-cache",
                        *extra,
                    ]
                )
                == 0
            )
        requests[where] = len(server.requests) - 1  # all but the preflight
        assert ("dev split scored on ray (2 at once)" in capsys.readouterr().err) == (where == "ray")
        metas[where] = json.loads(out.with_name(f"{where}.meta.json").read_text())
        metas[where]["state"] = {k: v for k, v in json.loads(out.read_text()).items() if k != "metadata"}
    here, ray = metas["here"], metas["ray"]
    assert here["n_dev"] == 2 and len(set(here["before_scores"])) == 2  # the two examples score apart: order counts
    for key in ("before_scores", "after_scores", "before", "after", "metric_calls", "state"):
        assert ray[key] == here[key], key
    assert requests["ray"] == requests["here"] and ray["lm_calls"] == here["lm_calls"] == requests["here"]
