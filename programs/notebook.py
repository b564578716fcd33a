"""How results show in Jupyter: the views are registered with IPython's display formatters, so the data
classes know nothing of them.

A `Report` shows as `report.html` does, sized for a notebook cell (with its Markdown view beside it, for
front ends without HTML); a `GatherResult` as the gathering loop in brief; a program's prediction as the
result it carries. `import deepresearch` registers them when it runs inside IPython; `register(shell)` does it
for any other shell.
"""

from __future__ import annotations

from typing import Any

# (module, class) of each result, with its Markdown and HTML views by name: registered by name, so that
# neither the class nor its view is imported before a result is shown
_VIEWS = {
    ("deepresearch.programs.artifacts", "Report"): ("report_markdown", "report_html"),
    ("deepresearch.programs.gather.artifacts", "GatherResult"): ("gather_markdown", None),
    ("deepresearch.programs.prediction", "ResultPrediction"): ("prediction_markdown", "prediction_html"),
}


def report_html(report: Any) -> str:
    from deepresearch.programs.report_view import report_html as page  # lazy: start-up

    return page(report, embedded=True)


def prediction_html(prediction: Any) -> str | None:
    """The report's HTML view when the prediction carries a report; None (Markdown only) otherwise."""
    from deepresearch.programs.artifacts import Report  # lazy: start-up

    report = prediction.toDict().get("report")
    return report_html(report) if isinstance(report, Report) else None


def _markdown(name: str):
    def view(result: Any) -> str:
        from deepresearch.programs import render  # lazy: start-up

        return getattr(render, name)(result)

    return view


def register(shell: Any = None) -> bool:
    """Register the views with `shell`'s display formatters (default: the running IPython shell).
    Returns whether there was a shell to register with."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    formatters = shell.display_formatter.formatters
    for (module, name), (markdown, html) in _VIEWS.items():
        formatters["text/markdown"].for_type_by_name(module, name, _markdown(markdown))
        if html is not None:
            formatters["text/html"].for_type_by_name(module, name, globals()[html])
    return True
