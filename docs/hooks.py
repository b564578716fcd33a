"""MkDocs hooks: lets the API reference (mkdocstrings) find the `deepresearch` package, and renders the
command line's option reference into docs/reference/cli.md from the parsers (`deepresearch.cli.reference`).

The repository root is the package (pyproject.toml maps `deepresearch` to `.`), so no folder named
`deepresearch` exists for griffe to find by name. A temporary folder holding a link of that name to the
root goes first on sys.path, where mkdocstrings' search paths begin, before the mkdocstrings plugin
sets up its handler.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority


@event_priority(100)  # before mkdocstrings' own on_config
def on_config(config):
    root = Path(config.config_file_path).resolve().parent
    folder = Path(tempfile.mkdtemp(prefix="deepresearch-api-"))
    (folder / "deepresearch").symlink_to(root, target_is_directory=True)
    sys.path.insert(0, str(folder))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return config


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "reference/cli.md":
        return markdown
    from deepresearch.cli.reference import render  # found through the folder on_config put on sys.path

    return render(markdown)
