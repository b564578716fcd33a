"""What Jupyter shows for a result: IPython's own display formatter, with our views registered on it."""

from __future__ import annotations

from types import SimpleNamespace

from IPython.core.formatters import DisplayFormatter

from deepresearch.programs.notebook import register


def shown(result, mime: str = "text/markdown") -> str | None:
    """The `mime` view IPython's display formatter gives `result` (None when it has none)."""
    formatter = DisplayFormatter()
    assert register(SimpleNamespace(display_formatter=formatter))
    data, _ = formatter.format(result)
    return data.get(mime)
