"""Write errors are one line naming the path and the cause, found before the work where they can be, and a
full disk leaves consistent files (issue 30, item 4); the folder's lock file is removed when a run ends
and a stale one never blocks (issue 28, item 6)."""

from __future__ import annotations

import errno
import json
import os
import time

import pytest

from deepresearch.cli import main
from deepresearch.programs.runtime import outputs
from deepresearch.programs.runtime.outputs import LOCK_FILE

QUESTION = "Does obesity increase the risk of type 2 diabetes?"


def run(out, *options, corpus=None):
    return main(
        [
            "-q",
            "run",
            QUESTION,
            "--corpus",
            str(corpus) if corpus else "scifact",
            "--lm",
            "offline",
            "--out",
            str(out),
            *options,
        ]
    )


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "out, cause",
    [
        ("/dev/null/x", "not a folder"),
        ("/proc/self", "cannot be written"),
    ],
)
def test_an_unusable_out_folder_is_one_line_naming_it_and_the_cause(capfd, clean_lm_env, out, cause):
    started = time.monotonic()
    assert run(out) == 2
    line = one_error_line(capfd.readouterr().err)
    assert out in line and cause in line and "another run" not in line
    assert time.monotonic() - started < 20  # refused before the corpus was loaded and indexed


def test_a_file_where_the_out_folder_belongs_and_an_empty_out_are_refused(tmp_path, capfd, clean_lm_env):
    (tmp_path / "file").write_text("x")
    assert run(tmp_path / "file") == 2
    assert "is a file" in one_error_line(capfd.readouterr().err)
    assert main(["run", QUESTION, "--lm", "offline", "--out", ""]) == 2
    assert "--out is empty" in one_error_line(capfd.readouterr().err)
    assert not (tmp_path / "runs").exists()


def test_a_read_only_filesystem_is_named_for_run_index_and_eval(tmpfs, capfd, clean_lm_env, scifact_head):
    ro = tmpfs(ro=True)
    assert run(ro / "out") == 2
    assert "read-only" in one_error_line(capfd.readouterr().err)
    assert main(["index", str(scifact_head(50)), "--out", str(ro / "index")]) == 2
    assert "read-only" in one_error_line(capfd.readouterr().err)
    started = time.monotonic()
    assert main(["eval", "retrieval", "--corpus", "scifact", "--retriever", "bm25", "--json", str(ro / "s.json")]) == 2
    line = one_error_line(capfd.readouterr().err)
    assert "--json" in line and "read-only" in line
    assert time.monotonic() - started < 10  # before the evaluation ran, not after


def test_a_full_disk_leaves_no_finished_looking_report_and_run_json_records_the_failure(
    tmpfs, capfd, clean_lm_env, scifact_head
):
    small = tmpfs(size=48 * 1024)
    code = run(small / "out", "--depth", "2", "--breadth", "3", corpus=scifact_head(2000))
    err = capfd.readouterr().err
    assert code == 3, err[-3000:]
    assert "no space left" in one_error_line(err)
    record = json.loads((small / "out" / "run.json").read_text())
    assert record["status"] == "error" and "No space left" in record["error"]
    assert not (small / "out" / "report.md").exists()
    assert not (small / "out" / LOCK_FILE).exists()


def test_a_disk_full_at_the_report_mocked_at_the_os_boundary(tmp_path, capfd, clean_lm_env, scifact_head, monkeypatch):
    real_fsync = os.fsync

    def fsync(fd):  # the disk fills up as the report is written
        if ".report.md." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(outputs.os, "fsync", fsync)
    code = run(tmp_path / "out", "--depth", "1", corpus=scifact_head(300))
    err = capfd.readouterr().err
    assert code == 3 and "no space left" in one_error_line(err)
    assert not (tmp_path / "out" / "report.md").exists()
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "error"
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["status"] == "done"  # the trace was whole before the report failed; run.json says it failed


def test_the_lock_file_goes_when_a_run_ends_and_a_stale_one_does_not_block(tmp_path, capfd, clean_lm_env, scifact_head):
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_FILE).write_text("999999")  # left by a process that is gone
    assert run(out, "--depth", "1", corpus=scifact_head(300)) == 0, capfd.readouterr().err
    assert (out / "report.md").exists() and not (out / LOCK_FILE).exists()
    assert run(out, "--depth", "1", "--deadline", "nan", corpus=scifact_head(300)) == 2  # a failed start too
    assert "--deadline must be > 0, got nan" in one_error_line(capfd.readouterr().err)
    assert not (out / LOCK_FILE).exists()
