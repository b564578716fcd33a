"""Source-integration metrics of a Markdown report.

Works on the published DeepResearch^Eco reports, whose sources are the URL list under `## Sources`,
and on ours, whose `## References` list names a URL or a corpus document id per entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# A source is a unique string matching this pattern anywhere in the file.
URL = re.compile(r"https?://[^\s\)]+")
# Our reference lines (deepresearch.programs.artifacts.Reference.render): "[3] Title (2020). doc 12345".
DOC_REFERENCE = re.compile(r"^\s*\[\d+\].*?\bdoc (\S+)\s*$", re.M)
REFERENCE_HEADING = re.compile(r"^#{1,6}\s*(references|sources)\s*$", re.I | re.M)
# "12_o3-mini_orkg_d4_b4.md": question index, model, search engine, depth, breadth.
REPORT_NAME = re.compile(r"^(?P<index>\d+)_(?P<model>.+)_(?P<engine>[^_]+)_d(?P<depth>\d+)_b(?P<breadth>\d+)$")


@dataclass(frozen=True)
class SourceStats:
    """Counts behind the source-integration metrics of one report.

    Attributes:
        n_sources: Unique sources: URLs anywhere in the file, plus corpus document ids listed
            in a `## References` section for entries without a URL.
        words: Whitespace-separated tokens of the whole file, the source list included.
    """

    n_sources: int
    words: int

    @property
    def sources_per_1k_words(self) -> float:
        """n_sources / (words / 1000); 0 for an empty file."""
        return self.n_sources / (self.words / 1000) if self.words else 0.0


@dataclass(frozen=True)
class ReportName:
    """The configuration a published report file name encodes."""

    index: int
    model: str
    engine: str
    depth: int
    breadth: int

    @property
    def config(self) -> str:
        return f"d{self.depth}_b{self.breadth}"


def unique_urls(text: str) -> list[str]:
    """The distinct URLs of `text`, in order of first appearance."""
    return list(dict.fromkeys(URL.findall(text)))


def referenced_doc_ids(markdown: str) -> list[str]:
    """Corpus document ids of reference entries that have no URL, in list order."""
    headings = list(REFERENCE_HEADING.finditer(markdown))  # the list: after the last References or Sources heading
    section = markdown[headings[-1].end() :] if headings else ""
    return list(dict.fromkeys(m.group(1).rstrip(".") for m in DOC_REFERENCE.finditer(section)))


def source_stats(markdown: str) -> SourceStats:
    """Unique sources and word count of a report.

    Example:
        >>> source_stats("Text [1].\\n\\n## Sources\\n\\n- https://a.org/x\\n- https://a.org/x").n_sources
        1
    """
    sources = set(unique_urls(markdown)) | {f"doc:{d}" for d in referenced_doc_ids(markdown)}
    return SourceStats(n_sources=len(sources), words=len(markdown.split()))


def parse_report_name(path: str | Path) -> ReportName:
    """Reads `<index>_<model>_<engine>_d<depth>_b<breadth>.md`.

    Raises:
        ValueError: when the name does not follow that pattern.
    """
    stem = Path(path).stem
    m = REPORT_NAME.match(stem)
    if not m:
        raise ValueError(
            f"report name {Path(path).name!r} does not match <index>_<model>_<engine>_d<depth>_b<breadth>.md; "
            f"rename it, e.g. 12_o3-mini_orkg_d4_b4.md"
        )
    return ReportName(
        index=int(m["index"]), model=m["model"], engine=m["engine"], depth=int(m["depth"]), breadth=int(m["breadth"])
    )
