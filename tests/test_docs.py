"""The documentation site (docs/, mkdocs.yml) builds with --strict, and its pages and the README speak to
users: every page is in the navigation, and no sentence points at material a user does not have (the
project's internal specs, this machine's shared folders) or reads like a lab notebook (load averages)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PLACEHOLDER = "<!-- placeholder: replaced at merge -->"


class _Loader(yaml.SafeLoader):
    """Reads mkdocs.yml, whose Python tags (e.g. !!python/name:) are not needed here."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_pages() -> list[str]:
    def walk(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from walk(value) if isinstance(value, list) else [value]

    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    return list(walk(config["nav"]))


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_site_builds_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    # the API reference is generated from the docstrings
    assert "Plans tasks, researches each as a node of a recursive tree" in api
    assert "open_retriever" in api and "compile_program" in api
    text = re.sub(r"<[^>]+>", " ", api)  # the docstrings are user-facing too
    found = {why: m.group(0) for pattern, why in NOT_FOR_USERS.items() if (m := re.search(pattern, text, re.I))}
    assert found == {}, found


def test_every_page_is_in_the_navigation_and_every_nav_entry_exists():
    listed = nav_pages()
    on_disk = {str(p.relative_to(DOCS)) for p in pages()}
    assert sorted(set(listed)) == sorted(listed), "a page is listed twice"
    assert set(listed) == on_disk, set(listed) ^ on_disk
    for path in pages():
        text = path.read_text(encoding="utf-8")
        if text.startswith(PLACEHOLDER):
            continue
        assert text.startswith("# "), f"{path.relative_to(ROOT)} does not open with its title"


# What a user reading the README or the site does not have, or does not need.
NOT_FOR_USERS = {
    r"\bspecs?\s+0\d\d\b": "the project's internal specs",
    r"§": "sections of the internal specs",
    r"\.\./shared|/work/": "this machine's shared folders",
    r"load average|\bat (a )?(machine )?load\b|\(load \d": "the machine's load at the time",
    r"\bissue \d+\b": "the project's issue numbers",
}


@pytest.mark.parametrize("path", [ROOT / "README.md", *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_speak_to_users(path):
    text = path.read_text(encoding="utf-8")
    found = {why: m.group(0) for pattern, why in NOT_FOR_USERS.items() if (m := re.search(pattern, text, re.I))}
    assert found == {}, found


def test_the_readme_is_read_in_five_minutes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 160 and len(readme.split()) <= 1800
    headings = re.findall(r"^## (.+)$", readme, re.M)
    assert headings[:2] == ["Two commands", "A first run, offline"], headings
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links
