import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.predict.history import combine_with_history


def _history(rows):
    return pl.DataFrame({
        C.PROMPT_ID: [r[0] for r in rows], C.RESPONSE_TOKENS: [r[1] for r in rows],
        C.TRUNCATED: pl.Series([None] * len(rows), dtype=pl.Boolean),
        C.EPOCH: pl.Series([None] * len(rows), dtype=pl.Int32),
    })


def test_weight_grows_with_the_number_of_samples():
    ids = pl.Series(["a", "b", "c"])
    mu = np.log(np.array([100.0, 100.0, 100.0]))
    sigma = np.full(3, 0.3)
    history = _history([("a", 1000)] + [("b", 1000)] * 8)
    out, _, seen, fit = combine_with_history(ids, mu, sigma, history, prior_samples=1.0)
    assert seen.tolist() == [1, 8, 0]
    # Offset recalibration moves every prompt towards the observed scale; "b" (8 samples) trusts data most.
    wa, wb = 1 / 2, 8 / 9
    cal = mu + fit.offset
    np.testing.assert_allclose(out[0], wa * np.log(1000) + (1 - wa) * cal[0])
    np.testing.assert_allclose(out[1], wb * np.log(1000) + (1 - wb) * cal[1])
    np.testing.assert_allclose(out[2], cal[2])  # never seen: the (recalibrated) model


def test_unseen_prompts_keep_the_model_when_history_is_about_others():
    ids = pl.Series(["x"])
    out, sigma, seen, fit = combine_with_history(ids, np.array([5.0]), np.array([0.3]), _history([("y", 148)]))
    assert seen.tolist() == [0]
    np.testing.assert_allclose(out, [5.0])
    assert fit.prompts_seen == 0


def test_history_fixes_the_scale_of_unseen_prompts():
    rng = np.random.default_rng(0)
    n = 200
    ids = pl.Series([f"p{i}" for i in range(n)])
    true = rng.normal(8.0, 0.5, n)
    mu_model = (true - 8.0) * 0.8 + 5.0  # the model ranks right but predicts a ~20x smaller scale
    rows = [(f"p{i}", int(np.exp(true[i] + rng.normal(0, 0.2)))) for i in range(100) for _ in range(4)]
    out, _, seen, fit = combine_with_history(ids, mu_model, np.full(n, 0.3), _history(rows))
    unseen = seen == 0
    assert abs(np.mean(out[unseen] - true[unseen])) < 0.15
    assert 0.25 <= fit.prior_samples <= 16
