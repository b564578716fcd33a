"""The harmonic mean of two rates: F1 of precision and recall, and every F-score built the same way."""

from __future__ import annotations


def harmonic_mean(a: float, b: float) -> float:
    """2ab / (a + b), or 0 when a + b is not positive.

    F1 is `harmonic_mean(precision, recall)`; V-measure (homogeneity, completeness) and Soft-F1 (NSR, NSP)
    use the same formula.

    Example:
        >>> harmonic_mean(0.5, 1.0)
        0.6666666666666666
    """
    return 2 * a * b / (a + b) if a + b > 0 else 0.0
