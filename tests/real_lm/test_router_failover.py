"""Two real llama-servers behind the LM router; one is killed mid-run and the run still completes.

The trace's `lm_routing` names the server that failed (its failover) and counts what each server answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.real_lm.server import LlamaServer
from tests.real_lm.test_pipelines import QUESTION, SMALL, kept_evidence


def test_a_run_survives_a_killed_server_and_the_trace_names_the_failover(tmp_path, data_dir):
    out = tmp_path / "run"
    with LlamaServer(threads=1) as first, LlamaServer(threads=1) as second:
        command = [
            sys.executable,
            "-c",
            "import sys; from deepresearch import cli; sys.exit(cli.main(sys.argv[1:]))",
            "run",
            QUESTION,
            "--corpus",
            "scifact",
            "--depth",
            "1",
            "--breadth",
            "2",
            "--out",
            str(out),
            *SMALL,
            "--lm",
            "openai/smollm2",
            "--structured",
            "schema",
            "--verify",  # see SMALL in test_pipelines.py: the test is about failover, not the report's support
            "off",
            "--no-cache",  # every request reaches a server: answers cached by an earlier test would not
            "--lm-server",
            f"{first.base_url} max_parallel=1",
            # most traffic to the second server, so that it takes research requests before the run can end
            # (a reply that plans one task makes the run short)
            "--lm-server",
            f"{second.base_url} max_parallel=1 weight=9",
        ]
        env = {**__import__("os").environ, "DEEPRESEARCH_DATA": str(data_dir)}
        env.pop("DEEPRESEARCH_LM", None)
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 600
        # kill the second server while it works on its second request: with one request at a time (max_parallel=1)
        # its first was answered by then, and the one in flight must fail over to the first server. (Waiting for a
        # third request raced the end of the run when the model planned a single task.)
        while time.time() < deadline and run.poll() is None:
            if second.log_path.read_text(errors="replace").count("launch_slot_") >= 2:
                break
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before the second server was used: " + run.stderr.read()[-2000:]
        second.process.kill()
        second.process.wait()
        stdout, stderr = run.communicate(timeout=900)
    trace = json.loads((out / "trace.json").read_text())
    kept_evidence(run.returncode, trace, stderr[-3000:])  # done, or honestly partial when nothing was kept
    routing = trace["lm_routing"]
    assert routing["servers"] == [first.base_url, second.base_url]
    assert routing["answered"][second.base_url] >= 1  # it served before it died
    assert routing["answered"][first.base_url] >= 1
    failed = {f["server"] for f in routing["failovers"]}
    assert second.base_url in failed and first.base_url not in failed
    assert (out / "report.md").read_text().strip()
