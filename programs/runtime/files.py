"""The names of the files a run writes in its folder, in a module that imports nothing: the command line's
--help names them without loading DSPy (`outputs` and `stage_log` write them)."""

from __future__ import annotations

RUN_RECORD = "run.json"
LOCK_FILE = ".deepresearch.lock"  # held while a command writes into a folder
STAGE_LOG = "stages.jsonl"
RUN_FILES = (
    "report.md",
    "report.html",
    "trace.json",
    "journal.jsonl",
    STAGE_LOG,
    "answer.md",
    "taxonomy.json",
    "references.bib",
    RUN_RECORD,
)  # a run's own files; --overwrite removes these
