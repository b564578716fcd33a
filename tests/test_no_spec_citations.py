"""The code speaks for itself: no comment, docstring or page cites a section of the project's internal specs,
which a reader of the repository does not have. Where a rule matters, the code says it in its own words, or
names the public paper it comes from (DeepResearch-Eco, HERO, ParallelResearch, TaxoBench, ScholarGym).

Scanned: every .py file of the package (its folders and root modules; .venv and build output are not part of
it), every Markdown page under docs/ and the README."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("programs", "optimize", "eval", "signatures", "retrievers", "benchmarks", "tests", "examples", "docs")

# Built from pieces so that this file, which is scanned too, does not match its own pattern.
_SPEC, _SECTION = "spec", "\N{SECTION SIGN}"
CITATION = re.compile(_SPEC + r" 00[0-4]|" + _SECTION + r"\s*\d", re.IGNORECASE)

# Lines that may match: none now (the benchmarks name the paper's tables, not the specs). An entry is the file
# and the stripped line; one that no longer occurs fails the test, so the list cannot go stale.
ALLOWED: set[tuple[str, str]] = set()


def scanned_files() -> list[Path]:
    files = [*ROOT.glob("*.py"), ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    files += [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    return sorted({p for p in files if p.is_file()})


def test_the_scan_covers_the_package():
    names = {str(p.relative_to(ROOT)) for p in scanned_files()}
    assert {"__init__.py", "README.md", "programs/config.py", "tests/test_no_spec_citations.py"} <= names
    assert any(name.startswith("docs/") and name.endswith(".md") for name in names)


def test_the_pattern_finds_a_citation():
    assert CITATION.search("(" + _SPEC + " 001 " + _SECTION + "4.7)")
    assert CITATION.search(_SPEC.title() + " 004's adaptive browsing")
    assert CITATION.search("validation (" + _SECTION + "3.3)")
    assert not CITATION.search("a StageSpec, spec004 = run(...), test_spec_002_table_7")


def test_no_line_cites_an_internal_spec():
    found, allowed_seen = [], set()
    for path in scanned_files():
        rel = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not CITATION.search(line):
                continue
            if (rel, line.strip()) in ALLOWED:
                allowed_seen.add((rel, line.strip()))
            else:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == [], "lines citing an internal spec; say the rule or name the paper:\n" + "\n".join(found)
    assert allowed_seen == ALLOWED, f"allowed lines no longer found, remove them from ALLOWED: {ALLOWED - allowed_seen}"
