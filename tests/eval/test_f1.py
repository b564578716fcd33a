import pytest

from deepresearch.eval.f1 import harmonic_mean


def test_harmonic_mean_is_f1_and_zero_when_both_rates_are_zero():
    assert harmonic_mean(0.5, 1.0) == pytest.approx(2 / 3)
    assert harmonic_mean(1.0, 0.5) == harmonic_mean(0.5, 1.0)
    assert harmonic_mean(0.7, 0.7) == pytest.approx(0.7)
    assert harmonic_mean(0.0, 1.0) == 0.0 and harmonic_mean(0.0, 0.0) == 0.0
