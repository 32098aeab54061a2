import numpy as np
import pytest

from asp_cli.predict import evaluate as E


def test_perfect_and_reversed_rankings():
    x = np.arange(1, 21, dtype=float)
    assert E.kendall_tau(x, x) == pytest.approx(1.0)
    assert E.spearman(x, -x) == pytest.approx(-1.0)
    assert E.tail_recall(x, x) == 1.0
    assert E.tail_recall(-x, x) == 0.0
    assert E.mae_log(x * np.e, x) == pytest.approx(1.0)


def test_constant_input_gives_nan_not_an_error():
    assert np.isnan(E.kendall_tau(np.ones(5), np.arange(5)))


def test_calibration_coverage():
    cal = E.calibration(np.array([10, 10, 10, 10]), np.array([5, 10, 20, 40]))
    assert cal["coverage"] == 0.5 and cal["median_ratio"] == 1.5
    assert sum(row["prompts"] for row in cal["by_quintile"]) == 4
