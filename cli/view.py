"""`deepresearch view RUN_DIR`: open a run's report.html in the browser, or print its path.

A run writes report.html beside report.md; for a folder from an older version that has only trace.json,
the view is written from the trace first (`deepresearch.programs.report_view.report_html`). Where no
browser can be started (a server, a container), the path is printed to open elsewhere.
"""

from __future__ import annotations

import argparse
import json
import webbrowser
from pathlib import Path

VIEW = "report.html"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run's output folder (the --out of deepresearch run)")
    parser.add_argument("--no-browser", action="store_true", help="only print the path of report.html")


def view_file(run_dir: str | Path) -> Path:
    """The run's report.html, written from its trace.json when the folder has none.

    Raises:
        FileNotFoundError: the folder holds no run, or its trace has no report yet (a run still working).
    """
    folder = Path(run_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; pass the --out folder of a run")
    path = folder / VIEW
    if path.exists():
        return path
    trace_path = folder / "trace.json"
    if not trace_path.exists():
        raise FileNotFoundError(f"{folder} holds no {VIEW} and no trace.json; pass the --out folder of a run")
    try:
        trace = json.loads(trace_path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{trace_path} is not JSON ({err}); run the question again") from err
    if "markdown" not in trace:
        raise FileNotFoundError(
            f"{trace_path} has no report yet (the run is working, or raised before "
            f"writing one); wait for it, or continue it with deepresearch run --resume"
        )
    from deepresearch.programs.artifacts import Report  # lazy: start-up
    from deepresearch.programs.report_view import report_html  # lazy: start-up
    from deepresearch.programs.runtime.outputs import atomic_write_text  # lazy: start-up

    return atomic_write_text(path, report_html(Report.from_dict(trace), config=trace.get("config"), run=trace))


def main(args: argparse.Namespace) -> int:
    path = view_file(args.run_dir).resolve()
    if not args.no_browser and webbrowser.open(path.as_uri()):
        print(f"opened {path}")
    else:
        print(path if args.no_browser else f"no browser to open it here; open {path}")
    return 0
