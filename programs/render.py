"""The Markdown views of results, as a notebook shows them (see `programs/notebook.py`).

The report with clickable citations and references, then a compact summary of the research tree and of what
the run cost; the gathering loop in brief; a taxonomy tree as an indented list; a program's prediction as the
result it carries.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from deepresearch.programs.artifacts import Node, Report
from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.prediction import FIELD_CHARS
from deepresearch.programs.reference import Reference
from deepresearch.programs.runtime.text import inert_markdown, shorten

if TYPE_CHECKING:
    import dspy

CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")  # [3] or [1, 4]
REFERENCES_HEADING = "## References"
_LINKABLE = re.compile(r"https?://[^\s<>\[\]\\`]+", re.IGNORECASE)  # a URL our own Markdown link may hold
TREE_LINES = 40  # a tree longer than this shows its first nodes and a count of the rest


def reference_url(ref: Reference) -> str | None:
    """Where a reference can be opened: its DOI link, else its URL; None for a corpus document only."""
    return f"https://doi.org/{ref.doi}" if ref.doi else ref.url


def linked_citations(body: str, references: tuple[Reference, ...]) -> str:
    """`body` with each citation number that has a URL made a Markdown link to it: [3] -> [[3](url)], shown [3]."""
    urls = {ref.number: url for ref in references if (url := reference_url(ref)) and _LINKABLE.fullmatch(url)}

    def link(match: re.Match) -> str:
        numbers = [int(n) for n in re.split(r"\s*,\s*", match.group(1))]
        if not any(urls.get(n) for n in numbers):
            return match.group(0)
        return "[" + ", ".join(f"[{n}]({urls[n]})" if urls.get(n) else str(n) for n in numbers) + "]"

    return CITATION.sub(link, body)


def reference_line(ref: Reference) -> str:
    """A References entry with its URL linked, when the reference has an http(s) URL to open."""
    line = ref.render()
    url = reference_url(ref)
    if not url or not _LINKABLE.fullmatch(url) or not line.endswith(f". {url}"):
        return line
    return line.removesuffix(f". {url}") + f". [{url}]({url})"


def tree_lines(nodes: tuple[Node, ...], limit: int = TREE_LINES) -> list[str]:
    """One Markdown list item per node, indented by depth: id, status, counts and the (shortened) query."""
    lines: list[str] = []
    total = 0
    for root in nodes:
        for node in root.walk():
            total += 1
            if len(lines) < limit:
                indent = "  " * (node.node_id.count("."))
                lines.append(
                    f"{indent}- `{node.node_id}` {node.status} · {len(node.retrieved_ids)} hits · "
                    f"{len(node.learnings)} learnings · {inert_markdown(shorten(node.query, 70))}"
                )
    if total > limit:
        lines.append(f"- … and {total - limit} more nodes")
    return lines


def cost_line(report: Report) -> str:
    """The run's cost in one line: LM calls, tokens, dollars when known, time."""
    s = report.stats
    parts = [f"{s.lm_calls} LM calls", f"{s.tokens:,} tokens"]
    dollars = (s.cost or {}).get("total")  # USD by LiteLLM's price map; None when a model has no price
    if isinstance(dollars, (int, float)):
        parts.append(f"${dollars:.4f}")
    if s.total_s is not None:
        parts.append(f"{s.total_s:.1f} s")
        if s.lm_calls and s.lm_busy_s is not None and s.total_s > 0:
            parts.append(f"LM busy {min(1.0, s.lm_busy_s / s.total_s):.0%}")
    parts.append("offline" if s.offline else f"strategy {s.strategy}")
    return " · ".join(parts)


def report_markdown(report: Report) -> str:
    """The report with clickable citations and references, then the tree and the run's cost, folded."""
    body, _, _ = report.markdown.partition(REFERENCES_HEADING)
    parts = [linked_citations(body.rstrip(), report.references)]
    if report.references:
        parts.append(REFERENCES_HEADING + "\n\n" + "\n".join(f"{reference_line(r)}  " for r in report.references))
    s = report.stats
    summary = (
        f"{s.nodes or len(report.nodes())} nodes ({s.failed_nodes} failed) · {s.searches} searches · "
        f"{s.learnings or len(report.learnings)} learnings · {len(report.references)} references"
    )
    parts.append(
        f"---\n**Run** {report.status}"
        + (f" ({inert_markdown(report.error, one_line=True)})" if report.error else "")
        + f" · {summary}  \n**Cost** {cost_line(report)}"
    )
    if report.tree:
        parts.append("**Tree**\n\n" + "\n".join(tree_lines(report.tree)))
    return "\n\n".join(parts) + "\n"


def gather_markdown(result: GatherResult) -> str:
    """The gathering loop in brief: the subquery tree, one line per round, the selected papers and the cost."""
    lines = [
        f"### Gathering: {inert_markdown(result.question, one_line=True)}",
        "",
        f"{len(result.rounds)} rounds · {len(result.tree)} subqueries · {len(result.selected)} papers "
        f"selected · stopped: {'failed' if result.is_failed else result.stop_reason}",
        "",
        "**Subqueries**",
        "",
    ]
    depth = {q.node_id: 0 for q in result.tree}
    for q in result.tree[:TREE_LINES]:
        depth[q.node_id] = depth.get(q.parent_id, -1) + 1 if q.parent_id is not None else 0
        lines.append(f"{'  ' * depth[q.node_id]}- round {q.iteration}: {inert_markdown(shorten(q.text, 80))}")
    if len(result.tree) > TREE_LINES:
        lines.append(f"- … and {len(result.tree) - TREE_LINES} more")
    lines += ["", "**Rounds**", ""]
    for r in result.rounds:
        picked = sum(len(s.selected) for s in r.searches)
        lines.append(f"- round {r.iteration}: {len(r.searches)} searches, {picked} selected")
    calls = sum(u.calls for u in result.usage.values())
    tokens = sum(u.total_tokens for u in result.usage.values())
    lines += ["", f"**Cost** {calls} LM calls · {tokens:,} tokens"]
    return "\n".join(lines) + "\n"


def taxonomy_lines(tree: dict[str, Any], depth: int = 0, limit: int = TREE_LINES) -> list[str]:
    """A TaxoBench tree (`name`, `subtopics`, `papers`) as an indented list: topics bold, with paper counts."""
    lines: list[str] = []

    def visit(node: dict[str, Any], level: int) -> None:
        if len(lines) >= limit:
            return
        subtopics, papers = node.get("subtopics") or [], node.get("papers") or []
        count = f" ({len(papers)} papers)" if papers else ""
        lines.append(f"{'  ' * level}- **{inert_markdown(str(node.get('name', '')), one_line=True)}**{count}")
        for child in subtopics:
            visit(child, level + 1)

    visit(tree, depth)
    return lines


def prediction_markdown(prediction: dspy.Prediction) -> str:
    """A program's prediction as the result it carries: its report, else its taxonomy tree, else its fields."""
    store = prediction.toDict()
    report, tree = store.get("report"), store.get("tree")
    if isinstance(report, Report):
        return report_markdown(report)
    if isinstance(tree, dict):
        return "\n".join(taxonomy_lines(tree)) + "\n"
    return "\n".join(f"- **{k}**: {shorten(repr(v), FIELD_CHARS)}" for k, v in store.items()) + "\n"
