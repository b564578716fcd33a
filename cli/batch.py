"""`deepresearch batch QUESTIONS.jsonl --out runs/`: research many questions, one run folder each.

Every line of QUESTIONS.jsonl is `{"question": "...", "id": "..."}` (`id` optional: else the line's number
and the question's first words). Each question is one `deepresearch run` into `--out/<id>/`, with the
options given after `--` (`-- --corpus scifact --lm openai/gpt-4.1-mini --preset quick`). Runs go to a local
process pool (`--workers`, default 2) or to a Ray cluster (`--ray auto` or `--ray HOST:PORT`, the [ray]
extra). A question whose folder holds a finished run is not run again, and an unfinished one resumes
from its journal, so running the same batch again finishes what an interrupted one left. As each
question ends a line reports it; `--out/summary.jsonl` (one record per question, in the file's order)
and `--out/summary.md` (the same as a table) are rewritten as results come in.

SIGINT or SIGTERM (or the batch's death) stops every question at once: no question starts after it, the
running ones stop as a stopped `run` does, the summary marks the unfinished ones `interrupted`, and the
batch exits 130 / 143; running it again finishes them. One batch at a time writes into an --out folder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from deepresearch import cli
from deepresearch.cli.options import add_output_arguments, add_workers_arguments, bound_numbers, check_numbers
from deepresearch.programs.formats.config_file import command_defaults
from deepresearch.programs.lm.secrets import redact, redact_json
from deepresearch.programs.runtime.executor import JobFailed, check_ray_address, open_executor
from deepresearch.programs.runtime.files import LOCK_FILE, RUN_RECORD
from deepresearch.programs.runtime.text import shorten

EXIT_FAILED = 3  # some question did not finish (as `run` exits when its run failed)
SUMMARY_COLUMNS = ("id", "status", "seconds", "lm_calls", "references", "folder", "error")
SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}  # the batch's exit code when a signal stopped it
OWN_FILES = ("batch.json", "summary.jsonl", "summary.md", LOCK_FILE)  # what batch writes in --out itself


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s QUESTIONS.jsonl --out DIR [--workers N | --ray auto|ADDRESS] [-- RUN OPTIONS]"
    parser.add_argument("questions", help='a JSONL file: one {"question": ..., "id": ...} per line (id optional)')
    add_output_arguments(
        parser,
        required=True,
        out_help="folder of the runs: one sub-folder per question, and the summary (summary.jsonl, summary.md)",
    )
    add_workers_arguments(
        parser,
        help="processes of this machine running questions at once (default 2)",
        ray_help="run the questions as tasks on a Ray cluster instead: auto (the cluster this "
        "machine joined with `ray start`) or its HOST:PORT; needs the [ray] extra",
    )
    parser.epilog = (
        "Everything after -- is passed to `deepresearch run` for every question, e.g. "
        "-- --corpus scifact --lm openai/gpt-4.1-mini --preset quick. " + (parser.epilog or "")
    )
    parser.set_defaults(run_options=[])
    plain = parser.parse_args

    def parse_args(args=None, namespace=None):  # argparse cannot take options after the positional file
        args = list(sys.argv[1:] if args is None else args)  # and a `--` tail, so the tail is split off here
        cut = args.index("--") if "--" in args else len(args)
        parsed = plain(args[:cut], namespace)
        parsed.run_options = args[cut + 1 :]
        return parsed

    parser.parse_args = parse_args  # type: ignore[method-assign]  # this parser's own parse_args, on purpose


def read_questions(path: str | Path) -> list[dict[str, str]]:
    """The questions of a JSONL file, each with a unique folder-safe `id`; a bad line fails naming its number."""
    path = Path(path)
    if not path.is_file():
        what = "a folder" if path.is_dir() else "no such file"
        raise ValueError(f'{path}: {what}; pass a JSONL file of {{"question": ...}} lines')
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not JSON ({err.msg}); write one JSON object per line") from None
        question = record.get("question") if isinstance(record, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f'{path}:{number}: no "question" text; each line needs {{"question": "..."}}')
        raw = str(record.get("id") or f"{number:04d}-{question}")
        qid = re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-.")[:64] or f"{number:04d}"
        if qid in seen:
            raise ValueError(f"{path}:{number}: id {qid!r} is used twice; give each question its own id")
        if qid.lower() in OWN_FILES:
            raise ValueError(f"{path}:{number}: id {qid!r} is the name of a file batch writes; give another id")
        seen.add(qid)
        out.append({"id": qid, "question": question.strip()})
    if not out:
        raise ValueError(f"{path}: holds no question")
    return out


def _status(folder: Path, question: str) -> str | None:
    """The status of `question`'s run in `folder` (None: none, or the folder holds another question's run)."""
    try:
        record = json.loads((folder / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record.get("status") if record.get("question") == question else None


def run_question(job: dict[str, Any]) -> dict[str, Any]:
    """Runs one question into its folder (resuming what its journal holds); its summary record.

    Runs in a worker process: the output of the run goes to the folder's batch.log, not the terminal.
    """
    folder = Path(job["folder"])
    started = time.time()
    if _status(folder, job["question"]) == "done":  # finished by an earlier batch: nothing to do
        return {**_record(job, folder), "skipped": True}
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["run", job["question"], "--out", str(folder), "--resume", "-q", *job["run_options"]]
    log = io.StringIO()
    here = os.getcwd()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            if Path(job["cwd"]).is_dir():  # where the batch was started: relative paths and ./deepresearch.toml
                os.chdir(job["cwd"])
            code = cli.main(argv)
        except SystemExit as exit_:  # argparse: a bad run option
            code = exit_.code if isinstance(exit_.code, int) else 2
        finally:
            os.chdir(here)
    (folder / "batch.log").write_text(log.getvalue(), encoding="utf-8")
    record = _record(job, folder)
    record["seconds"] = round(time.time() - started, 2)
    if code != 0 and not record.get("error"):
        lines = [line for line in log.getvalue().splitlines() if "error" in line.lower()] or log.getvalue().splitlines()
        record["error"] = shorten(lines[-1], 300) if lines else f"exit {code}"
    record["exit"] = code
    return record


def _record(job: dict[str, Any], folder: Path) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": job["id"],
        "question": job["question"],
        "folder": str(folder),
        "status": _status(folder, job["question"]) or "not started",
    }
    with contextlib.suppress(OSError, ValueError):
        trace = json.loads((folder / "trace.json").read_text())
        stats = trace.get("stats") or {}
        record.update(
            seconds=trace.get("seconds"), lm_calls=stats.get("lm_calls"), references=len(trace.get("references") or [])
        )
        if trace.get("error"):
            record["error"] = shorten(str(trace["error"]), 300)
    return record


def write_summary(out: Path, records: list[dict[str, Any] | None], jobs: list[dict[str, Any]]) -> None:
    """summary.jsonl and summary.md: one record per question in the file's order (pending ones too)."""
    rows = [
        r or {"id": j["id"], "question": j["question"], "status": "pending", "folder": j["folder"]}
        for r, j in zip(records, jobs)
    ]
    _write(out / "summary.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    lines = ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    for r in rows:
        cells = [str(r.get(c, "") if r.get(c) is not None else "") for c in SUMMARY_COLUMNS]
        cells[SUMMARY_COLUMNS.index("folder")] = Path(cells[SUMMARY_COLUMNS.index("folder")]).name
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    _write(out / "summary.md", "\n".join(lines) + "\n")


def _write(path: Path, text: str) -> None:
    from deepresearch.programs.runtime.outputs import atomic_write_text  # lazy: start-up

    try:
        atomic_write_text(path, text)
    except OSError as err:  # a full disk's error names no file: the one-line message names it
        raise OSError(err.errno, err.strerror, str(path)) from None


def run_batch(
    questions: list[dict[str, str]],
    out: Path,
    run_options: list[str],
    *,
    workers: int | None = None,
    ray: str | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Runs every question into `out/<id>`; their summary records, in the questions' order.

    A record that a signal left unfinished has status `interrupted` and names the signal in `stopped_by`.
    """
    from deepresearch.programs.runtime.outputs import out_folder_lock  # lazy: start-up

    with out_folder_lock(out, what="batch"):  # a second batch into `out` is refused here
        for q in questions:  # a file where a question's folder goes: said before anything runs
            if (out / q["id"]).exists() and not (out / q["id"]).is_dir():
                raise ValueError(f"{out / q['id']} is a file, not the folder of question {q['id']!r}; move it away")
        return _run_locked(questions, out, run_options, workers=workers, ray=ray, quiet=quiet)


def _run_locked(questions, out, run_options, *, workers, ray, quiet) -> list[dict[str, Any]]:
    jobs = [
        {**q, "folder": str((out / q["id"]).resolve()), "run_options": list(run_options), "cwd": os.getcwd()}
        for q in questions
    ]
    records: list[dict[str, Any] | None] = [None] * len(jobs)
    received: list[signal.Signals] = []
    pool = None

    def on_signal(signum, frame) -> None:
        received.append(signal.Signals(signum))
        if pool is not None:
            pool.stop(signum)
        with contextlib.suppress(Exception):  # a print the signal cut into may refuse a second one
            again = "; stopping them at once" if len(received) > 1 else " (send it again to stop them at once)"
            print(f"batch: {received[-1].name} received; stopping the running questions{again}", file=sys.stderr)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS} if main_thread else {}
    try:
        _write(
            out / "batch.json",
            redact_json(
                {
                    "questions": len(jobs),
                    "run_options": [redact(o) for o in run_options],
                    "executor": "ray" if ray else "local",
                    "started": time.time(),
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n",
        )
        write_summary(out, records, jobs)
        started = time.time()
        with open_executor(workers=workers, ray=ray) as pool:
            if received:  # stopped before the pool was up
                pool.stop(received[0])
            elif not quiet:
                print(
                    f"batch: {len(jobs)} questions on {pool.kind} ({pool.workers} at once)", file=sys.stderr, flush=True
                )
            for finished, (index, result) in enumerate(pool.map_unordered(run_question, jobs), 1):
                if isinstance(result, JobFailed):
                    result = {**_record(jobs[index], Path(jobs[index]["folder"])), "error": result.error, "exit": 1}
                    if result["status"] == "done":  # the worker died after the run had finished
                        result.pop("error")
                if received and result["status"] != "done":
                    result.update(_stopped(received[0]))
                records[index] = result
                write_summary(out, records, jobs)
                if not quiet:
                    mark = "skipped (done before)" if result.get("skipped") else result["status"]
                    print(
                        f"[{finished}/{len(jobs)}] {jobs[index]['id']}: {mark}"
                        f"{' - ' + result['error'] if result.get('error') and result['status'] != 'done' else ''}"
                        f" ({time.time() - started:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
        if received:  # the questions never started
            for index, job in enumerate(jobs):
                if records[index] is None:
                    records[index] = {**_record(job, Path(job["folder"])), **_stopped(received[0])}
            write_summary(out, records, jobs)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return [r for r in records if r is not None]


def _stopped(sig: signal.Signals) -> dict[str, Any]:
    return {"status": "interrupted", "stopped_by": sig.name, "error": f"interrupted by {sig.name}; run the batch again"}


def check_run_options(run_options: list[str]) -> None:
    """Parses the options after -- as `deepresearch run` will, with ./deepresearch.toml's [run] defaults, and
    checks their values, once for all the questions.

    Raises:
        ValueError: one line naming the bad option.
    """
    from deepresearch.cli import run as run_cli  # lazy: start-up
    from deepresearch.cli.research_run import parse_stage_lms, run_config  # lazy: start-up

    class Checking(cli.Parser):
        def print_help(self, file=None) -> None:  # `-- --help` is refused below, not answered
            pass

        def exit(self, status=0, message=None):
            problem = (message or "").strip().removeprefix(f"{self.prog}: error: ")
            raise ValueError(f"bad run option after --: {problem or '--help; see deepresearch run --help'}")

    parser = Checking(prog="deepresearch run")
    run_cli.add_arguments(parser)
    bound_numbers(parser)  # as the dispatcher bounds every command's numbers
    path, settings = cli._settings(None)  # what every question's `run` reads
    if path is not None:
        parser.set_defaults(**command_defaults(settings, path, "run", parser))
    args = parser.parse_args(["question", *run_options])
    try:
        check_numbers(parser, args)
        parse_stage_lms(args.stage_lm or [])
        run_config(args)
    except ValueError as err:
        raise ValueError(f"bad run option after --: {err}") from None
    if args.overwrite:
        raise ValueError("bad run option after --: batch resumes each question's run; leave --overwrite out")


def main(args: argparse.Namespace) -> int:
    run_options = list(args.run_options)
    if args.ray and args.workers:
        raise ValueError("--workers sets the local pool and --ray a cluster; pass one of them")
    if "--out" in run_options or any(o.startswith("--out=") for o in run_options):
        raise ValueError("--out after -- would send every question to one folder; give --out before --")
    questions = read_questions(args.questions)
    check_run_options(run_options)
    if args.ray:  # before --out is made
        check_ray_address(args.ray)
    records = run_batch(
        questions, Path(args.out), run_options, workers=args.workers, ray=args.ray, quiet=getattr(args, "quiet", False)
    )
    print((Path(args.out) / "summary.md").read_text(), end="")
    failed = [r for r in records if r["status"] != "done"]
    stopped = next((r["stopped_by"] for r in records if r.get("stopped_by")), None)
    print(
        f"batch: {len(records) - len(failed)} of {len(records)} questions done; summary: "
        f"{Path(args.out) / 'summary.jsonl'}"
        f"{'; run the same batch again to finish the interrupted ones' if stopped else ''}",
        file=sys.stderr,
    )
    if stopped:
        return SIGNALS[signal.Signals[stopped]]
    return EXIT_FAILED if failed else 0
