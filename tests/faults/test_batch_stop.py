"""`deepresearch batch` stops when told and refuses what it cannot do, up front: SIGINT, SIGTERM and the
batch's death stop every worker within seconds (no LM request after them beyond those in flight, no process
left), a second batch into one --out is refused, and bad ids, bad run options and a full disk are one line.

Real processes and signals, over real HTTP to the scripted local OpenAI-compatible server."""

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
from deepresearch.programs.runtime.outputs import LOCK_FILE
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler

ROOT = Path(__file__).resolve().parents[2]
# the child processes import the package as this process does (a PYTHONPATH given to the tests comes first)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))}
QUESTIONS = [
    {"id": "q1", "question": "Does obesity increase the risk of type 2 diabetes?"},
    {"id": "q2", "question": "Do statins reduce cardiovascular mortality?"},
    {"id": "q3", "question": "Does vitamin D prevent fractures?"},
    {"id": "q4", "question": "Does smoking cause lung cancer?"},
]

pytestmark = pytest.mark.usefixtures("clean_lm_env")


@pytest.fixture
def corpus(scifact_head) -> Path:
    """A small real corpus: each worker loads it in a moment."""
    return scifact_head(300)


def write_questions(path: Path, questions=QUESTIONS) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in questions))
    return path


def run_options(server, corpus: Path) -> list[str]:
    return [
        *("--corpus", str(corpus), "--depth", "1", "--breadth", "2", "--workers", "1"),
        *("--lm", "openai/local", "--api-base", server.base_url, "--no-cache", "--no-preflight"),
    ]


def start_batch(tmp_path: Path, server, corpus: Path, out: Path) -> subprocess.Popen:
    command = ["batch", str(write_questions(tmp_path / "q.jsonl")), "--out", str(out), "--workers", "2"]
    return subprocess.Popen(
        [sys.executable, "-m", "deepresearch.cli", *command, "--", *run_options(server, corpus)],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (the batch's workers)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for_requests(server, proc: subprocess.Popen, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(server.requests) < count and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f"the batch ended before the signal: {proc.stderr.read()[-2000:]}"
    assert len(server.requests) >= count, "the batch never asked the LM"


def summary(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_every_worker_at_once_and_a_rerun_finishes_only_the_rest(tmp_path, corpus, sig, code):
    out = tmp_path / "runs"
    with LocalOpenAIServer(research_handler(), delay=0.3) as server:
        proc = start_batch(tmp_path, server, corpus, out)
        wait_for_requests(server, proc, 2)
        workers = children(proc.pid)
        assert workers, "the batch runs no worker process"
        asked = len(server.requests)
        sent = time.monotonic()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 15, "the batch took too long to stop"
        assert proc.returncode == code, stderr[-2000:]
        assert f"{sig.name} received" in stderr
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers), "a worker outlived the batch"
        time.sleep(1)
        assert len(server.requests) - asked <= 2  # at most the request each worker had in flight
        stopped = summary(out)
        unfinished = [qid for qid, r in stopped.items() if r["status"] != "done"]
        assert unfinished and all(stopped[qid]["status"] == "interrupted" for qid in unfinished)
        assert "q4" in unfinished and sig.name in stopped["q4"]["error"]
        assert not (out / LOCK_FILE).exists()

        if sig == signal.SIGINT:  # the rerun is the same after either signal: once is enough
            return
        questions, server.delay = tmp_path / "q.jsonl", 0.02  # the rerun need not be slow
        assert cli.main(["-q", "batch", str(questions), "--out", str(out), "--", *run_options(server, corpus)]) == 0
    again = summary(out)
    assert all(r["status"] == "done" for r in again.values())
    assert {qid for qid, r in again.items() if not r.get("skipped")} == set(unfinished)


def test_the_death_of_the_batch_ends_its_workers_and_a_rerun_is_not_blocked(tmp_path, corpus):
    out = tmp_path / "runs"
    with LocalOpenAIServer(research_handler(), delay=0.3) as server:
        proc = start_batch(tmp_path, server, corpus, out)
        wait_for_requests(server, proc, 2)
        workers = children(proc.pid)
        proc.kill()
        proc.communicate(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers), "a worker outlived the batch killed with SIGKILL"
        asked = len(server.requests)
        time.sleep(1)
        assert len(server.requests) == asked
        # the lock file the killed batch left blocks nothing
        questions, server.delay = tmp_path / "q.jsonl", 0.02
        assert cli.main(["-q", "batch", str(questions), "--out", str(out), "--", *run_options(server, corpus)]) == 0
    assert all(r["status"] == "done" for r in summary(out).values())


def test_a_second_batch_into_the_same_folder_is_refused(tmp_path, corpus, capfd):
    out = tmp_path / "runs"
    with LocalOpenAIServer(research_handler(), delay=0.3) as server:
        first = start_batch(tmp_path, server, corpus, out)
        try:
            wait_for_requests(server, first, 1)
            questions = tmp_path / "q.jsonl"
            assert cli.main(["-q", "batch", str(questions), "--out", str(out), "--", *run_options(server, corpus)]) == 2
            err = capfd.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "another batch is writing to" in err[0] and str(out) in err[0]
            assert first.poll() is None  # the first goes on
        finally:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=30)


@pytest.mark.parametrize("qid", ["summary.jsonl", "summary.md", "batch.json"])
def test_an_id_naming_a_file_of_batch_is_refused_before_anything_runs(tmp_path, capfd, qid):
    questions = write_questions(tmp_path / "q.jsonl", [QUESTIONS[0], {"id": qid, "question": "Is coffee healthy?"}])
    out = tmp_path / "runs"
    assert cli.main(["batch", str(questions), "--out", str(out), "--", "--lm", "offline"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and repr(qid) in err[0] and "q.jsonl:2" in err[0]
    assert not out.exists()


def test_a_file_where_a_question_folder_goes_is_refused_before_anything_runs(tmp_path, capfd):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS[:2])
    out = tmp_path / "runs"
    out.mkdir()
    (out / "q2").write_text("notes")
    assert cli.main(["batch", str(questions), "--out", str(out), "--", "--lm", "offline"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out / "q2") in err[0]
    assert not (out / "q1").exists() and not (out / "summary.jsonl").exists()


@pytest.mark.parametrize(
    "options,said",
    [
        (["--depht", "2"], "did you mean --depth?"),
        (["--preset", "nope"], "invalid choice: 'nope'"),
        (["--depth", "0"], "--depth must be >= 1, got 0"),
        (["--overwrite"], "--overwrite"),
        (["--stage-lm", "nostage=x"], "--stage-lm"),
        (["--help"], "--help"),
    ],
)
def test_bad_run_options_fail_once_before_any_question(tmp_path, capfd, options, said):
    questions = write_questions(tmp_path / "q.jsonl")
    out = tmp_path / "runs"
    assert cli.main(["batch", str(questions), "--out", str(out), "--", "--lm", "offline", *options]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run option" in err[0] and said in err[0]
    assert not out.exists()


def test_a_disk_filling_up_mid_batch_is_one_line_naming_the_file(tmp_path, tmpfs, capfd, corpus):
    disk = tmpfs(64 * 1024)
    (disk / "fill").write_bytes(b"x" * (40 * 1024))  # room for the summary, not for the runs' outputs as well
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS[:2])
    out = disk / "runs"
    options = ["--lm", "offline", "--preset", "quick", "--corpus", str(corpus)]
    code = cli.main(["batch", str(questions), "--out", str(out), "--", *options])
    err = capfd.readouterr().err
    assert "questions on local" in err  # the questions had started
    assert "Traceback" not in err and "RuntimeError" not in err
    assert code == 3 and err.strip().splitlines()[-1].endswith(
        f"cannot use {out / 'summary.jsonl'}: no space left on the device"
    )


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_eval_gather_on_workers_stops_at_a_signal_and_a_rerun_runs_only_the_rest(tmp_path, data_dir, sig, code):
    # the same pool as batch's: a signal ends every worker within seconds, what finished stays recorded
    out, limit = tmp_path / "gathered", 80
    command = ["eval", "gather", "--data", str(data_dir / "scifact"), "--limit", str(limit), "--workers", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepresearch.cli", "-q", *command, "--out", str(out)],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 180
    while proc.poll() is None and time.monotonic() < deadline and not (results.exists() and results.stat().st_size):
        time.sleep(0.05)
    assert proc.poll() is None, f"eval gather ended before the signal: {proc.stderr.read()[-2000:]}"
    workers = children(proc.pid)
    assert workers, "eval gather runs no worker process"
    sent = time.monotonic()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code and time.monotonic() - sent < 15, stderr[-2000:]
    deadline = time.monotonic() + 5 + 10  # a worker's grace, then it is killed
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers), "a worker outlived eval gather"
    first = [json.loads(line)["query_id"] for line in results.read_text().splitlines()]  # every line whole
    assert 0 < len(first) < limit
    assert cli.main(["-q", *command, "--out", str(out)]) == 0  # the rerun: only the queries still missing
    again = [json.loads(line)["query_id"] for line in results.read_text().splitlines()]
    assert again[: len(first)] == first and len(again) == len(set(again)) == limit
