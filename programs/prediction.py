"""The `dspy.Prediction` the programs return."""

from __future__ import annotations

import dspy

from deepresearch.programs.runtime.text import shorten

FIELD_CHARS = 80  # a field's repr is cut to this many characters


class ResultPrediction(dspy.Prediction):
    """A `dspy.Prediction` whose `repr` cuts each field to a line (a run's report is large: its full repr ran
    to 80 KB). It behaves as a Prediction everywhere DSPy takes one (`dspy.Evaluate`, optimizers, `Parallel`);
    `report` (or `tree`, for a taxonomy) is the full result, and a notebook shows that result
    (`programs/notebook.py`).
    """

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={shorten(repr(v), FIELD_CHARS)}" for k, v in self._store.items())
        return f"{type(self).__name__}({fields})"

    __str__ = __repr__
