"""The scoring behind `deepresearch eval reports DIR` (its options: deepresearch.cli.eval_reports):
source-integration and quality metrics of a folder of Markdown reports.

Reports are grouped by the configuration in their file names (`12_o3-mini_orkg_d4_b4.md`); the command
prints mean, sample sd, min and max per group, writes every report's scores to `scores.csv` and a
depth x breadth heatmap of one metric to `heatmap.png`.
"""

from __future__ import annotations

import csv
import logging
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from deepresearch.eval.eco import OVERALL_WEIGHTS, eco_scores
from deepresearch.eval.report import parse_report_name, source_stats
from deepresearch.retrievers.extras import require

logger = logging.getLogger(__name__)

METRICS = ("n_sources", "words", "sources_per_1k_words", *(f"S_{k}" for k in OVERALL_WEIGHTS), "overall")
TABLE_METRICS = ("n_sources", "words", "sources_per_1k_words", "S_density", "overall")
# the names deepresearch.eval.protocols records them under (`overall` is the eco score of `eval report`)
TABLE_METRICS_PROTOCOL = ("n_sources", "words", "sources_per_1k_words", "eco_overall")


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float
    min: float
    max: float


def summarize(values: list[float]) -> Summary:
    """Mean, sample standard deviation (n - 1; 0 for one value), min and max."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(n=len(values), mean=statistics.fmean(values), sd=sd, min=min(values), max=max(values))


def score_report(markdown: str) -> dict[str, float]:
    """All per-report metrics: unique sources, words, sources per 1,000 words, the S_* eco scores and overall."""
    stats = source_stats(markdown)
    row: dict[str, float] = {
        "n_sources": stats.n_sources,
        "words": stats.words,
        "sources_per_1k_words": stats.sources_per_1k_words,
    }
    scores = eco_scores(markdown).as_dict()
    row.update({("overall" if k == "overall" else f"S_{k}"): v for k, v in scores.items()})
    return row


def score_folder(folder: str | Path) -> list[dict]:
    """One row per `*.md` report with a parsable name: index, model, engine, depth, breadth, config, metrics.

    Raises:
        FileNotFoundError: when the folder does not exist.
        ValueError: when no file name in it follows `<index>_<model>_<engine>_d<depth>_b<breadth>.md`.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"report folder not found: {folder}")
    rows, skipped = [], []
    for path in sorted(folder.glob("*.md")):
        try:
            name = parse_report_name(path)
        except ValueError:
            skipped.append(path.name)
            continue
        rows.append(
            {
                "file": path.name,
                "index": name.index,
                "model": name.model,
                "engine": name.engine,
                "depth": name.depth,
                "breadth": name.breadth,
                "config": f"{name.model}_{name.config}",
                **score_report(path.read_text(encoding="utf-8")),
            }
        )
    if skipped:
        logger.warning("skipped %d files whose names carry no configuration, e.g. %s", len(skipped), skipped[0])
    if not rows:
        raise ValueError(
            f"no report in {folder} is named <index>_<model>_<engine>_d<depth>_b<breadth>.md; "
            f"rename the files so the configuration can be read"
        )
    return rows


def group_summaries(rows: list[dict], metrics=METRICS) -> dict[str, dict[str, Summary]]:
    """config -> metric -> Summary, configurations in name order."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["config"]].append(row)
    return {cfg: {m: summarize([float(r[m]) for r in rs]) for m in metrics} for cfg, rs in sorted(groups.items())}


def format_table(summaries: dict[str, dict[str, Summary]], metrics=TABLE_METRICS) -> str:
    lines = []
    for metric in metrics:
        lines.append(f"{metric}")
        lines.append(f"  {'config':<22} {'n':>4} {'mean':>10} {'sd':>10} {'min':>10} {'max':>10}")
        for cfg, by_metric in summaries.items():
            s = by_metric[metric]
            lines.append(f"  {cfg:<22} {s.n:>4} {_num(s.mean)} {_num(s.sd)} {_num(s.min)} {_num(s.max)}")
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:>10.4f}" if abs(x) < 10 else f"{x:>10.2f}"


def heatmap_grid(rows: list[dict], metric: str, model: str) -> tuple[list[int], list[int], list[list[float]]]:
    """(depths, breadths, mean of `metric` per depth row and breadth column; NaN where no report)."""
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in rows:
        if r["model"] == model:
            cells[(r["depth"], r["breadth"])].append(float(r[metric]))
    depths = sorted({d for d, _ in cells})
    breadths = sorted({b for _, b in cells})
    grid = [[statistics.fmean(cells[(d, b)]) if cells.get((d, b)) else math.nan for b in breadths] for d in depths]
    return depths, breadths, grid


def write_heatmap(rows: list[dict], metric: str, path: str | Path) -> Path:
    """A depth x breadth heatmap of the mean of `metric`, one panel per model."""
    matplotlib = require("matplotlib", "plots", "the depth x breadth heatmap")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        depths, breadths, grid = heatmap_grid(rows, metric, model)
        image = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
        ax.set_xticks(range(len(breadths)), [str(b) for b in breadths])
        ax.set_yticks(range(len(depths)), [str(d) for d in depths])
        ax.set_xlabel("breadth")
        ax.set_ylabel("depth")
        ax.set_title(f"{model}: mean {metric}")
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    ax.text(j, i, f"{value:.3g}", ha="center", va="center", color="white", fontsize=10)
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_scores(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
