"""A run's output folder: files written whole or not at all, one writer at a time, one question per folder.

- `atomic_write_text` / `atomic_write_json` write beside the target, fsync, then `os.replace`: a reader
  sees the old file or the new one, never a torn one, even if the process dies mid-write.
- `out_folder_lock` holds an exclusive lock file in the folder for the whole run; a second run into the
  same folder stops at once, naming the process that holds it.
- `check_out_folder` / `open_run` keep one question per folder: `run.json` records the question, when the
  run started and its status. A folder holding another question's run is refused unless `overwrite`,
  which removes that run's files (`RUN_FILES`, nothing else). Before a run of the same question starts,
  the earlier report and trace are removed, so an old report is never taken for the new run's.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from deepresearch.programs.artifacts import FOLDER_STATUSES, RAISED, RUNNING, FolderStatus
from deepresearch.programs.lm.secrets import redact, redact_json
from deepresearch.programs.runtime.files import LOCK_FILE, RUN_FILES, RUN_RECORD
from deepresearch.programs.runtime.text import shorten

logger = logging.getLogger(__name__)

STALE_FILES = (
    "report.md",
    "report.html",
    "trace.json",
    "answer.md",
    "taxonomy.json",
    "references.bib",
)  # outputs of an earlier run of the same question; the journal is resume's


class OutFolderError(ValueError):
    """The output folder cannot take this run (another question's run, or not a folder); says what to do."""


class OutFolderBusy(OutFolderError):
    """Another process is writing to the output folder."""


INDEX_MANIFEST = "manifest.json"  # what `deepresearch index` writes last (deepresearch.retrievers.index.MANIFEST)

# errno -> the cause in words, for one-line messages about files
_CAUSES = {
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "it is a folder",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EEXIST: "it exists",
}


def os_error_line(err: OSError, path: str | Path | None = None) -> str:
    """One line naming the path and the cause of an OSError (`cannot use runs/x/report.md: the file system is
    read-only`)."""
    where = path or err.filename or "a file"
    cause = _CAUSES.get(err.errno or 0) or (err.strerror or type(err).__name__).lower()
    return f"cannot use {where}: {cause}"


def check_writable(folder: str | Path, option: str = "--out") -> Path:
    """Creates `folder` if needed and writes and removes a probe file in it, before any expensive work.

    Raises:
        OutFolderError: one line naming the folder and the cause (read-only, not a folder, no space...).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutFolderError(f"{option} {folder} is a file; pass a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".deepresearch-probe.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            os.write(fd, b"x")
            os.fsync(fd)
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
    except OSError as err:
        raise OutFolderError(f"{option} {folder} cannot be written: {os_error_line(err).split(': ', 1)[1]}") from None
    return folder


def check_file_writable(path: str | Path, option: str) -> Path:
    """Checks that `path` (a file an option names, such as --json) can be written, before the work that fills it."""
    path = Path(path)
    if path.is_dir():
        raise OutFolderError(f"{option} {path} is a folder; pass a file path")
    check_writable(path.parent if str(path.parent) else Path("."), option=f"{option} {path}: the folder")
    return path


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8", *, redacted: bool = False) -> Path:
    """Replaces `path` (its folder must exist) with `text` in one step: a reader never sees a partly written
    file. Returns the path.

    Every credential is removed from the text first (`secrets.redact`), unless `redacted` says the
    caller did (`atomic_write_json`).

    The text goes to a temporary file in the same folder (so the rename stays on one filesystem), which is
    flushed and fsynced before `os.replace` puts it in place. On any error the temporary file is removed
    and the old file, if any, is left as it was.
    """
    path = Path(path)
    if not redacted:
        text = redact(text)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as a plain open() would (mkstemp would force 0o600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding=encoding, newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)
    return path


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """`atomic_write_text` of `obj` as indented JSON (UTF-8 kept as is; unknown types written with `str`)."""
    return atomic_write_text(path, redact_json(obj, indent=2, ensure_ascii=False, default=str) + "\n", redacted=True)


def _fsync_folder(folder: Path) -> None:
    """Makes a rename inside `folder` durable; a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with suppress(OSError):  # some filesystems refuse to fsync a folder; the file itself is synced
            os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def out_folder_lock(folder: str | Path, what: str = "run") -> Iterator[Path]:
    """Holds the folder's lock file for the duration of the block; creates the folder if needed.

    The lock is taken with timeout 0 and released when the block exits, also on an exception; the lock file
    is removed then. The holder writes its process id into the lock file so that a second run can name it.
    A lock file whose process is gone does not block: the lock (flock) ended with the process.

    Args:
        folder: The run's output folder (or an index folder: `deepresearch index` takes the same lock).
        what: What holds the lock, for the message of a second one (`run`, `index build`).

    Yields:
        The folder, as a Path.

    Raises:
        OutFolderBusy: another process holds the lock.
        OutFolderError: `folder` is a file.
    """
    folder = check_writable(folder)  # a read-only or odd folder (/proc/self) is named as such, not as busy
    lock_path = folder / LOCK_FILE
    lock = FileLock(lock_path, timeout=0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        holder = _lock_holder(lock_path)
        raise OutFolderBusy(
            f"another {what} is writing to {folder}{f' (pid {holder})' if holder else ''}; "
            f"wait for it or pass another --out"
        ) from None
    if not _is_current(lock, lock_path):  # locked a file its last holder had just removed: it is no lock
        lock.release()
        raise OutFolderBusy(f"another {what} is starting in {folder}; wait for it or pass another --out")
    try:
        _write_holder(lock_path)
        yield folder
    finally:
        # removed while still held, so no one can take a lock on the file and find it gone; a lock file
        # a killed process left is no obstacle either: the kernel released its lock (flock) with the process
        with suppress(OSError):
            lock_path.unlink()
        lock.release()


def _is_current(lock: FileLock, lock_path: Path) -> bool:
    """Whether the file `lock` holds is still the one at `lock_path` (not one removed since it was opened)."""
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    if fd is None:
        return True
    try:
        return os.fstat(fd).st_ino == os.stat(lock_path).st_ino
    except OSError:
        return False


def _write_holder(lock_path: Path) -> None:
    # The lock is advisory (flock), so the holder may write the file it locks; filelock truncated it on acquire.
    try:
        with open(lock_path, "r+", encoding="ascii") as f:
            f.write(str(os.getpid()))
    except OSError as err:  # the pid is only for the message of a second run
        logger.debug("could not record the pid in %s: %s", lock_path, err)


def _lock_holder(lock_path: Path) -> str:
    try:
        pid = lock_path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return pid if pid.isdigit() else ""


def held_question(folder: str | Path) -> str | None:
    """The question whose run the folder holds: from `run.json`, else from a `trace.json` of an older run.

    Returns:
        The question; "" when the folder holds run outputs that name no readable question; None when it
        holds no run.
    """
    folder = Path(folder)
    for name in (RUN_RECORD, "trace.json"):
        path = folder / name
        if not path.exists():
            continue
        try:
            question = json.loads(path.read_text(encoding="utf-8")).get("question")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(question, str) and question.strip():
            return question
    return "" if any((folder / name).exists() for name in RUN_FILES) else None


def is_index_folder(folder: str | Path) -> bool:
    """Whether `folder` holds an index (its manifest, or the bm25/ or dense/ part of one being built)."""
    folder = Path(folder)
    return (folder / INDEX_MANIFEST).is_file() or any((folder / part).is_dir() for part in ("bm25", "dense"))


def check_out_folder(folder: str | Path, question: str, *, overwrite: bool = False) -> None:
    """Refuses a folder holding another question's run, unless `overwrite`; reads only, removes nothing.

    Raises:
        OutFolderError: the folder holds a run of another (or an unreadable) question and `overwrite` is false.
    """
    if is_index_folder(folder):
        raise OutFolderError(
            f"{folder} holds an index built by `deepresearch index`; pass it as --index and another folder as --out"
        )
    held = held_question(folder)
    if held is None or overwrite or held.strip() == question.strip():
        return
    what = f"another question ({shorten(held, 60)!r})" if held else "a run whose question it does not record"
    raise OutFolderError(f"{folder} holds {what}; pass --overwrite to replace it, or pass another --out")


@dataclass
class RunFolder:
    """An output folder claimed by a run: its files are written atomically and `run.json` tracks its status."""

    path: Path
    question: str
    started: float
    status: FolderStatus = RUNNING

    def write_text(self, name: str, text: str) -> Path:
        return atomic_write_text(self.path / name, text)

    def write_json(self, name: str, obj: Any) -> Path:
        return atomic_write_json(self.path / name, obj)

    def finish(self, status: FolderStatus, error: str = "") -> None:
        """Records the run's final status (a `RunStatus`, or `error` when it raised) in `run.json`."""
        if status not in FOLDER_STATUSES:
            raise ValueError(f"unknown run status {status!r}; choose one of: {', '.join(FOLDER_STATUSES)}")
        self.status = status
        self.write_record(finished=time.time(), **({"error": redact(error)} if error else {}))

    def record(self, **extra: Any) -> dict[str, Any]:
        """What `run.json` holds: the question, start time, status and process id, plus `extra`."""
        return {"question": self.question, "started": self.started, "status": self.status, "pid": os.getpid(), **extra}

    def write_record(self, **extra: Any) -> None:
        atomic_write_json(self.path / RUN_RECORD, self.record(**extra))


@contextmanager
def open_run(folder: str | Path, question: str, *, overwrite: bool = False) -> Iterator[RunFolder]:
    """Starts a run in `folder`; hold `out_folder_lock(folder)` around it.

    Checks the folder (`check_out_folder`), removes another question's files when `overwrite`, or the
    stale report and trace of the same question, and writes `run.json` with status `running`. If the block
    raises, `run.json` records `interrupted` (KeyboardInterrupt) or `error`, and the exception goes on.

    Args:
        folder: The run's output folder; it must exist.
        question: The run's question.
        overwrite: Replace a run of another question.

    Yields:
        The claimed folder; call `finish(status)` on it when the run ends.

    Raises:
        OutFolderError: the folder holds another question's run and `overwrite` is false.
    """
    folder = Path(folder)
    check_out_folder(folder, question, overwrite=overwrite)
    held = held_question(folder)
    is_same = held is not None and held.strip() == question.strip()
    for name in STALE_FILES if is_same else RUN_FILES:
        (folder / name).unlink(missing_ok=True)
    run = RunFolder(path=folder, question=question, started=time.time())
    run.write_record()
    try:
        yield run
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            _record_end(run, "interrupted")
        else:
            _record_end(run, RAISED, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        raise


def _record_end(run: RunFolder, status: FolderStatus, error: str = "") -> None:
    """`run.finish` while an exception is on its way out: a failure to record must not replace that exception.

    On a full disk the atomic write (a new file beside the old) can fail where rewriting `run.json` in place
    still fits (truncating it frees its blocks first), so that is tried next: the record must not say `running`.
    """
    try:
        run.finish(status, error=error)
    except OSError as err:  # `finish` set the status before it failed to write it
        record = run.record(finished=time.time(), **({"error": redact(error)} if error else {}))
        try:
            with open(run.path / RUN_RECORD, "w", encoding="utf-8") as f:
                f.write(redact_json(record, ensure_ascii=False) + "\n")
        except OSError:
            logger.warning("could not record status %r in %s: %s", status, run.path / RUN_RECORD, err)
