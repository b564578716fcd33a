"""`deepresearch eval reports DIR`: source-integration and quality metrics of a folder of Markdown reports.

The scoring is `deepresearch.eval.run_reports` (light: no DSPy, no numpy at import).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from deepresearch.eval.protocols import protocol_lines
from deepresearch.eval.run_reports import (
    METRICS,
    TABLE_METRICS_PROTOCOL,
    format_table,
    group_summaries,
    score_folder,
    write_heatmap,
    write_scores,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="folder of Markdown reports named <index>_<model>_<engine>_d<d>_b<b>.md")
    parser.add_argument("--out", default="runs/eval_reports", help="folder for scores.csv and heatmap.png")
    parser.add_argument("--metric", default="n_sources", choices=METRICS, help="metric shown in the heatmap")


def main(args: argparse.Namespace) -> int:
    rows = score_folder(args.folder)
    print(f"{len(rows)} reports in {args.folder}")
    print(format_table(group_summaries(rows)))
    print("what each metric matches (docs/reference/protocols.md):")
    for line in protocol_lines(TABLE_METRICS_PROTOCOL):
        print(f"  {line}")
    out = Path(args.out)
    print(f"scores:  {write_scores(rows, out / 'scores.csv')}")
    print(f"heatmap: {write_heatmap(rows, args.metric, out / 'heatmap.png')}")
    return 0
