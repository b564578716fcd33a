"""The output folder (atomic writes, the lock, one question per folder) and the progress display."""

import io
import json
import os
import sys
import threading
import types

import pytest
from tqdm import tqdm

from deepresearch.programs.artifacts import Event
from deepresearch.programs.runtime.outputs import (
    LOCK_FILE,
    RUN_FILES,
    OutFolderBusy,
    OutFolderError,
    atomic_write_json,
    atomic_write_text,
    check_out_folder,
    held_question,
    open_run,
    out_folder_lock,
)
from deepresearch.programs.runtime.progress import Progress, choose_display

QUESTION = "Does vitamin D supplementation reduce fracture risk?"


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_atomic_write_replaces_content_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    mode = path.stat().st_mode
    atomic_write_text(path, "new ✓")
    assert path.read_text(encoding="utf-8") == "new ✓" and leftovers(tmp_path) == []
    assert path.stat().st_mode == mode  # the umask decides, as for a plain write (not mkstemp's 0o600)
    atomic_write_json(tmp_path / "trace.json", {"question": "q ✓", "n": 1})
    assert json.loads((tmp_path / "trace.json").read_text(encoding="utf-8")) == {"question": "q ✓", "n": 1}
    assert leftovers(tmp_path) == []


def test_a_failed_atomic_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "half \udcff written")  # a lone surrogate fails while writing
    assert path.read_text() == "old" and leftovers(tmp_path) == []


def test_a_held_folder_refuses_a_second_writer_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    with out_folder_lock(out), pytest.raises(OutFolderBusy) as err, out_folder_lock(out):
        pass
    message = str(err.value)
    assert "\n" not in message and f"another run is writing to {out} (pid {os.getpid()})" in message
    assert "--out" in message
    with out_folder_lock(out):  # released on exit
        pass


def test_the_lock_is_released_when_the_run_raises(tmp_path):
    with pytest.raises(RuntimeError), out_folder_lock(tmp_path):
        raise RuntimeError("boom")
    with out_folder_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).exists()


def test_a_folder_of_another_question_is_refused_unless_overwrite(tmp_path):
    check_out_folder(tmp_path, QUESTION)  # empty: fine
    (tmp_path / "run.json").write_text(json.dumps({"question": "Another question?", "status": "done"}))
    with pytest.raises(OutFolderError, match=r"holds another question \('Another question\?'\); pass --overwrite"):
        check_out_folder(tmp_path, QUESTION)
    check_out_folder(tmp_path, QUESTION, overwrite=True)
    check_out_folder(tmp_path, " Another question? ")  # the same question: allowed


def test_the_question_of_an_older_run_is_read_from_its_trace(tmp_path):
    assert held_question(tmp_path) is None
    (tmp_path / "report.md").write_text("# a report")
    assert held_question(tmp_path) == ""  # outputs that name no question are not taken for this run's
    with pytest.raises(OutFolderError, match="does not record"):
        check_out_folder(tmp_path, QUESTION)
    (tmp_path / "trace.json").write_text(json.dumps({"question": "Older question?"}))
    assert held_question(tmp_path) == "Older question?"


def test_a_rerun_of_the_same_question_removes_the_stale_report_and_trace(tmp_path):
    for name in ("report.md", "trace.json", "journal.jsonl", "notes.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "run.json").write_text(json.dumps({"question": QUESTION, "status": "done"}))
    with open_run(tmp_path, QUESTION) as run:
        assert not (tmp_path / "report.md").exists() and not (tmp_path / "trace.json").exists()
        assert (tmp_path / "journal.jsonl").exists() and (tmp_path / "notes.txt").exists()  # resume's, and not ours
        record = json.loads((tmp_path / "run.json").read_text())
        assert record["question"] == QUESTION and record["status"] == "running" and record["started"] == run.started
        run.write_text("report.md", "new")
        run.finish("done")
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "done"


def test_overwrite_removes_only_the_other_runs_files(tmp_path):
    for name in (*RUN_FILES, "notes.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "run.json").write_text(json.dumps({"question": "Another question?"}))
    with open_run(tmp_path, QUESTION, overwrite=True):
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "run.json"]
        assert held_question(tmp_path) == QUESTION


@pytest.mark.parametrize("error,status", [(RuntimeError("boom\nmore"), "error"), (KeyboardInterrupt(), "interrupted")])
def test_a_run_that_raises_is_recorded_as_such(tmp_path, error, status):
    with pytest.raises(type(error)), open_run(tmp_path, QUESTION):
        raise error
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == status and "finished" in record
    assert record.get("error", "") == ("RuntimeError: boom" if status == "error" else "")


def planned(node_id, query):
    return Event(kind="node_planned", node_id=node_id, message=query)


def test_progress_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(stream=stream)
    assert progress.display == "lines"  # a StringIO is not a TTY
    for event in [
        Event(kind="run_start"),
        planned("1", "vitamin D and bone density"),
        Event(kind="node_start", node_id="1", message="vitamin D and bone density"),
        Event(kind="stage_end", node_id="1", stage="select"),
        Event(kind="node_end", node_id="1", message="done", elapsed_s=12.34, counts={"hits": 5, "learnings": 3}),
        Event(kind="node_end", node_id="2", message="skipped", elapsed_s=12.5),
        Event(
            kind="run_end",
            message="done",
            elapsed_s=20.0,
            counts={"nodes": 2, "searches": 1, "learnings": 3, "failed_nodes": 0, "tokens": 9},
        ),
    ]:
        progress(event)
    assert stream.getvalue().splitlines() == [
        "[12.3s] node 1 done · 5 hits · 3 learnings · vitamin D and bone density",
        "[12.5s] node 2 skipped",
        "[20.0s] run done · 2 nodes · 1 searches · 3 learnings · 0 failed nodes",
    ]


def test_progress_shows_the_gathering_rounds_before_any_node():
    stream = io.StringIO()
    progress = Progress(stream=stream, display="lines")
    progress(
        Event(
            kind="stage_end",
            node_id="gather:1",
            stage="round",
            elapsed_s=4.0,
            counts={"searches": 3, "selected": 5, "dropped": 0, "failed": 0},
        )
    )
    progress(
        Event(
            kind="stage_end",
            node_id="gather",
            stage="gather",
            message="no_new_subqueries",
            elapsed_s=9.0,
            counts={"rounds": 2, "subqueries": 4, "selected": 7, "searches": 6},
        )
    )
    assert stream.getvalue().splitlines() == [
        "[4.0s] gathering round 1 · 3 searches · 5 selected · 0 dropped · 0 failed",
        "[9.0s] gathering done (no_new_subqueries) · 2 rounds · 4 subqueries · 7 selected · 6 searches",
    ]


def test_a_long_query_is_cut_in_its_line():
    stream = io.StringIO()
    progress = Progress(stream=stream, display="lines")
    progress(planned("1", "word " * 40))
    progress(Event(kind="node_end", node_id="1", message="done"))
    line = stream.getvalue().strip()
    assert line.endswith("…") and len(line) < 100


def test_the_bar_total_grows_with_planned_nodes():
    progress = Progress(stream=io.StringIO(), display="bar")
    progress(Event(kind="run_start"))
    progress(planned("1", "a"))
    progress(planned("2", "b"))
    assert (progress.bar.total, progress.bar.n) == (2, 0)
    progress(Event(kind="node_end", node_id="1", message="done"))
    progress(planned("1.1", "c"))
    progress(planned("1.1", "c"))  # announced twice, counted once
    assert (progress.bar.total, progress.bar.n) == (3, 1)
    progress(Event(kind="node_start", node_id="3", message="d"))  # started without being announced
    assert progress.bar.total == 4
    progress(Event(kind="run_end", message="done"))
    assert progress.bar is None  # closed at the end of the run


def test_quiet_shows_nothing():
    stream = io.StringIO()
    progress = Progress(quiet=True, stream=stream)
    progress(planned("1", "a"))
    progress(Event(kind="node_end", node_id="1", message="done"))
    progress(Event(kind="run_end", message="done"))
    progress.close()
    assert stream.getvalue() == "" and progress.bar is None


class BrokenStream(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")  # stderr piped into a reader that has gone


def another_thread_can_draw_a_bar() -> bool:
    thread = threading.Thread(target=lambda: list(tqdm(range(2), file=io.StringIO())), daemon=True)
    thread.start()
    thread.join(timeout=10)
    return not thread.is_alive()


@pytest.mark.parametrize("display", ["lines", "bar"])
def test_a_broken_stream_never_fails_the_run(display):
    progress = Progress(stream=BrokenStream(), display=display)
    progress(planned("1", "a"))
    progress(Event(kind="node_end", node_id="1", message="done"))  # raises inside: the display turns off
    progress(Event(kind="run_end", message="done"))
    progress.close()
    assert progress.display == "off"
    # tqdm keeps its process-wide lock when its stream raises mid-draw; no later bar in the process could draw
    assert another_thread_can_draw_a_bar()


def test_an_unknown_display_is_named():
    with pytest.raises(ValueError, match="choose one of: auto, off, bar, notebook, lines"):
        Progress(display="fancy")


def test_a_jupyter_kernel_gets_the_notebook_bar(monkeypatch):
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})  # a kernel's shell; a terminal IPython has none
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert choose_display(io.StringIO()) == "notebook"
    shell.config = {}
    assert choose_display(io.StringIO()) == "lines"
