"""Citations survive every stage: a stage's cited text checked against the learnings it was given.

The merger and the enrichment writer rewrite learnings into prose. Their output may lose a learning's
citations or cite ids that were never in their inputs (an LM's invention, or text copied from a
passage). `guard_citations` drops every cited id that is not among the inputs, and brings back each
learning none of whose ids survived by appending it, cited, to the text. A learning that kept some of
its ids but lost others is left as it is (the merger may drop a redundant source) and
its lost ids are counted. `check_node_citations` applies it inside a node and counts on the node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deepresearch.programs.citing.citations import CITATION, citation_labels
from deepresearch.signatures.types import Learning


@dataclass(frozen=True)
class GuardedText:
    """A stage's text after the check, and what the check changed.

    Attributes:
        text: The text, stray citations removed and lost learnings appended.
        restored: Ids brought back by appending the learnings that had lost all of theirs.
        lost: Ids of learnings that kept others (counted, not restored).
        stray: Cited ids removed because no input had them.
    """

    text: str
    restored: int = 0
    lost: int = 0
    stray: int = 0


def guard_citations(
    text: str, learnings: Sequence[Learning], known: Iterable[str] = (), empty: str = ""
) -> GuardedText:
    """Checks `text` (a stage's output) against `learnings` (its input).

    Args:
        text: The stage's output.
        learnings: The learnings it was given; their ids are the citations it may use.
        known: Further ids it may cite (e.g. those of the summary an enrichment paragraph extends).
        empty: The stage's "nothing found" text, treated as empty.
    """
    allowed = {i.lower() for x in learnings for i in x.source_ids} | {i.lower() for i in known}
    stray = 0

    def keep(match: re.Match) -> str:
        nonlocal stray
        labels = citation_labels(match)
        kept = [label for label in labels if label in allowed]
        stray += len(labels) - len(kept)
        return f"[{', '.join(kept)}]" if kept else ""

    body = "" if text.strip() == empty else text
    body = re.sub(r"[ \t]+([.,;:!?])", r"\1", CITATION.sub(keep, body)).strip()
    present = {label for m in CITATION.finditer(body) for label in citation_labels(m)} | {i.lower() for i in known}
    restored, lost, appended = 0, 0, []
    for x in learnings:
        ids = [i for i in dict.fromkeys(x.source_ids)]
        missing = [i for i in ids if i.lower() not in present]
        if not missing:
            continue
        if len(missing) < len(ids):
            lost += len(missing)
            continue
        appended.append(f"{x.text.strip().rstrip('.')} [{', '.join(ids)}].")
        restored += len(ids)
        present.update(i.lower() for i in ids)
    if appended:
        body = (body + "\n\n" if body else "") + " ".join(appended)
    return GuardedText(text=body or text, restored=restored, lost=lost, stray=stray)


def check_node_citations(
    life, stage: str, text: str, learnings: Sequence[Learning], known: Iterable[str] = (), empty: str = ""
) -> str:
    """`guard_citations` inside a node: counts the changes on the node and the run, notes them on the node.

    Returns the checked text.
    """
    out = guard_citations(text, learnings, known, empty)
    if out.restored or out.lost or out.stray:
        life.count(restored_citations=out.restored, lost_citations=out.lost, stray_citations=out.stray)
        note = (
            f"{stage}: {out.restored} lost citations restored (their learnings appended), {out.lost} dropped, "
            f"{out.stray} citing no input removed"
        )
        life.update(notes=(*life.node.notes, note))
    return out.text
