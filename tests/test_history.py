"""History corrects every prompt: per-source shifts, partially pooled, censored, monotone within a source."""

import math

import numpy as np
import polars as pl
import pytest

from asp_cli import columns as C
from asp_cli.predict.evaluate import kendall_tau
from asp_cli.predict.calibration_text import calibration_lines
from asp_cli.predict.history import combine_with_history


def _history(rows, truncated=None):
    return pl.DataFrame({
        C.PROMPT_ID: [r[0] for r in rows], C.RESPONSE_TOKENS: [r[1] for r in rows],
        C.TRUNCATED: pl.Series(truncated if truncated is not None else [None] * len(rows), dtype=pl.Boolean),
        C.EPOCH: pl.Series([None] * len(rows), dtype=pl.Int32),
    })


def _mix(n_per=300, seed=0):
    """Two sources; the policy writes 20x (aime) and 2x (gsm) what the model says, the model ranks within."""
    rng = np.random.default_rng(seed)
    sources = np.array(["aime"] * n_per + ["gsm"] * n_per)
    true = np.concatenate([rng.normal(8.5, 0.4, n_per), rng.normal(5.5, 0.4, n_per)])
    shift = np.where(sources == "aime", math.log(20), math.log(2))
    mu_model = true - shift + rng.normal(0, 0.2, 2 * n_per)
    ids = [f"p{i}" for i in range(2 * n_per)]
    return ids, sources, true, mu_model, rng


def test_weight_grows_with_the_number_of_samples():
    ids = pl.Series(["a", "b", "c"])
    mu = np.log(np.array([100.0, 100.0, 100.0]))
    sigma = np.full(3, 0.3)
    history = _history([("a", 1000)] + [("b", 1000)] * 8)
    out, _, seen, fit = combine_with_history(ids, mu, sigma, history, prior_samples=1.0)
    assert seen.tolist() == [1, 8, 0]
    prior = mu + fit.global_shift  # one source: the global correction for every prompt
    wa, wb = 1 / 2, 8 / 9
    np.testing.assert_allclose(out[0], wa * np.log(1000) + (1 - wa) * prior[0])
    np.testing.assert_allclose(out[1], wb * np.log(1000) + (1 - wb) * prior[1])
    np.testing.assert_allclose(out[2], prior[2])  # never seen: the corrected model
    assert 0 < fit.global_shift < np.log(10)  # shrunk toward the model a little (two prompts only)


def test_ids_matching_none_leave_the_model_alone():
    ids = pl.Series(["x", "z"])
    mu, sigma = np.array([5.0, 6.0]), np.array([0.3, 0.3])
    history = _history([("y", 148)] * 3 + [("w", 10)] * 3)  # other prompts, even with several samples
    out, out_sigma, seen, fit = combine_with_history(ids, mu, sigma, history)
    assert seen.tolist() == [0, 0]
    np.testing.assert_array_equal(out, mu)
    np.testing.assert_array_equal(out_sigma, sigma)
    assert fit.prompts_seen == 0 and calibration_lines(fit.as_dict()) == []


def test_each_source_gets_its_own_scale_and_keeps_its_ranking():
    ids, sources, true, mu_model, rng = _mix()
    covered = rng.choice(len(ids), 60, replace=False)
    rows = [(ids[i], int(np.exp(true[i]))) for i in covered]
    out, _, seen, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                             data_source=sources)
    by_name = {s.name: s for s in fit.sources}
    assert abs(math.log(by_name["aime"].as_dict()["factor"]) - math.log(20)) < 0.3
    assert abs(math.log(by_name["gsm"].as_dict()["factor"]) - math.log(2)) < 0.3
    unseen = seen == 0
    for name in ("aime", "gsm"):
        part = unseen & (sources == name)
        assert kendall_tau(out[part], mu_model[part]) == pytest.approx(1.0)  # monotone within a source
    # Across sources, the corrected model now ranks far better than the model alone.
    assert kendall_tau(out[unseen], true[unseen]) > kendall_tau(mu_model[unseen], true[unseen]) + 0.1


def test_a_source_with_few_observations_is_shrunk_toward_the_global_term():
    ids, sources, true, mu_model, rng = _mix()
    aime = [i for i in range(len(ids)) if sources[i] == "aime"]
    gsm = [i for i in range(len(ids)) if sources[i] == "gsm"]
    rows = [(ids[i], int(np.exp(true[i]))) for i in aime[:40] + gsm[:40]]
    rows_one = rows + [(ids[gsm[-1]], int(np.exp(true[gsm[-1]] + 3.0)))]  # a third source, seen once
    third = sources.copy()
    third[gsm[-1]] = "odd"
    _, _, _, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows_one),
                                        data_source=third)
    odd = next(s for s in fit.sources if s.name == "odd")
    own = true[gsm[-1]] + 3.0 - mu_model[gsm[-1]]
    assert fit.global_shift < odd.log_shift < own  # pulled toward the global term, not all the way
    assert fit.between_source_sd is not None and fit.between_source_sd > 0


def test_a_source_without_observations_gets_the_global_term():
    ids, sources, true, mu_model, rng = _mix()
    third = np.where(np.arange(len(ids)) % 10 == 0, "new", sources)
    rows = [(ids[i], int(np.exp(true[i]))) for i in range(0, len(ids), 7) if third[i] != "new"]
    out, _, _, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                          data_source=third)
    new = next(s for s in fit.sources if s.name == "new")
    assert new.fitted == "global" and new.log_shift == pytest.approx(fit.global_shift)
    assert new.prompts == 0 and new.prompts_corrected == int((third == "new").sum())


def test_one_source_is_a_global_correction_and_says_so():
    ids, sources, true, mu_model, rng = _mix()
    rows = [(ids[i], int(np.exp(true[i]))) for i in range(len(ids)) if sources[i] == "gsm"][:50]
    _, _, _, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                        data_source=sources)
    assert all(s.log_shift == pytest.approx(fit.global_shift) for s in fit.sources)
    assert any("one data source (gsm)" in note for note in fit.notes)
    assert any("one data source" in line for line in calibration_lines(fit.as_dict()))


def test_every_sample_truncated_is_a_lower_bound_and_said():
    ids = pl.Series([f"p{i}" for i in range(50)])
    mu = np.full(50, np.log(100.0))
    rows = [(f"p{i}", 4096) for i in range(10)]
    out, _, _, fit = combine_with_history(ids, mu, np.full(50, 0.3), _history(rows), cap=4096)
    assert fit.lower_bound and fit.global_lower_bound and fit.censored_samples == 10
    assert fit.global_shift >= np.log(4096 / 100.0) - 1e-9  # at least the cap, never shrunk below it
    assert any("lower bound" in note for note in fit.notes)
    assert "lower bound" in " ".join(calibration_lines(fit.as_dict()))
    # A covered prompt with only capped samples is predicted at or above the cap.
    assert out[0] >= np.log(4096) - 1e-6


def test_a_capped_source_pulled_above_its_bound_says_which_part_is_its_own():
    """Every AIME sample at a small cap, GSM8K at 8x the model: AIME's factor came from the pooled term and was
    labelled "lower bound", though its own samples prove only cap / model."""
    ids, sources, true, mu_model, rng = _mix()
    rows, cut = [], []
    for i in range(len(ids)):
        if i % 10:
            continue
        if sources[i] == "aime":
            rows.append((ids[i], 2000))
            cut.append(True)
        else:
            rows.append((ids[i], int(np.exp(mu_model[i] + math.log(8) + rng.normal(0, 0.2)))))
            cut.append(False)
    _, _, _, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows, cut),
                                        cap=2000, data_source=sources)
    aime = next(s for s in fit.as_dict()["sources"] if s["data_source"] == "aime")
    gsm = next(s for s in fit.as_dict()["sources"] if s["data_source"] == "gsm")
    assert aime["lower_bound"] and "bound_factor" in aime and "bound_factor" not in gsm
    assert aime["factor"] > aime["bound_factor"] * 1.01  # pulled above its own bound by GSM8K's 8x
    lines = calibration_lines(fit.as_dict())
    assert (f"aime x{aime['factor']:.3g} (30 prompts, every sample at the cap: at least x{aime['bound_factor']:.3g}, "
            "the rest from the other sources)") in lines[1]


def test_censored_samples_raise_the_estimate_above_the_imputation_free_mean():
    """A Tobit shift: capped samples pull the correction above what their cap alone says."""
    rng = np.random.default_rng(1)
    n = 200
    ids = [f"p{i}" for i in range(n)]
    mu = rng.normal(6.0, 0.3, n)
    true = mu + 2.0 + rng.normal(0, 0.3, n)
    cap = float(np.exp(np.quantile(true, 0.7)))
    lengths = np.minimum(np.exp(true), cap).astype(int)
    rows = [(ids[i], int(lengths[i])) for i in range(n)]
    _, _, _, fit = combine_with_history(pl.Series(ids), mu, np.full(n, 0.3), _history(rows), cap=int(cap))
    naive = float(np.mean(np.log(lengths) - mu))
    assert naive < fit.global_shift
    assert abs(fit.global_shift - 2.0) < 0.1  # the censored-normal estimate recovers the true shift
    assert not fit.lower_bound


def test_random_lengths_keep_every_source_ranking():
    """The old recalibration gave every unseen prompt one value for a history of random lengths."""
    ids, sources, true, mu_model, rng = _mix()
    covered = rng.choice(len(ids), 30, replace=False)
    rows = [(ids[i], int(rng.integers(1, 8192))) for i in covered]
    out, _, seen, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                             data_source=sources)
    unseen = seen == 0
    for name in ("aime", "gsm"):
        part = unseen & (sources == name)
        assert np.unique(out[part]).size == part.sum()  # not flattened
        assert kendall_tau(out[part], mu_model[part]) == pytest.approx(1.0)
    assert fit.slope > 0


def test_random_lengths_with_difficulty_levels_keep_every_source_ranking():
    """A 5% history of random lengths with AIME-like problem numbers (15 levels) read the noise as differences
    between the levels (between-difficulty sd 1.66 on the real AIME prompts) and reordered each source."""
    ids, sources, true, mu_model, rng = _mix()
    level = rng.integers(1, 16, len(ids)).astype(float)
    covered = rng.choice(len(ids), 30, replace=False)
    rows = [(ids[i], int(np.exp(rng.uniform(0.0, np.log(8192))))) for i in covered]
    out, _, seen, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                             data_source=sources, difficulty=level)
    assert fit.difficulty_groups == 30 and fit.between_difficulty_sd < 0.3
    unseen = seen == 0
    for name in ("aime", "gsm"):
        part = unseen & (sources == name)
        assert kendall_tau(out[part], mu_model[part]) > 0.9


def test_spread_is_corrected_where_prompts_have_several_samples():
    ids, sources, true, mu_model, rng = _mix()
    covered = rng.choice(len(ids), 40, replace=False)
    rows = [(ids[i], int(np.exp(true[i] + rng.normal(0, 0.6)))) for i in covered for _ in range(4)]
    _, sigma, seen, fit = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                               data_source=sources)
    assert fit.spread_from_history and abs(fit.log_spread - 0.6) < 0.1
    assert fit.as_dict()["spread"] == {"model": 0.3, "history": round(fit.log_spread, 4)}
    assert np.all(np.abs(sigma[seen == 0] - 0.6) < 0.15)  # the unseen prompts' sigma moved too
    # One sample per prompt says nothing about the spread: it stays the model's.
    one = [(ids[i], int(np.exp(true[i]))) for i in covered]
    _, sigma1, seen1, fit1 = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(one),
                                                  data_source=sources)
    assert not fit1.spread_from_history and np.all(sigma1[seen1 == 0] == 0.3)


def test_difficulty_levels_get_their_own_shifts_pooled_toward_the_source():
    rng = np.random.default_rng(3)
    n = 600
    ids = [f"p{i}" for i in range(n)]
    level = rng.integers(1, 4, n).astype(float)
    mu = rng.normal(6.0, 0.3, n)
    true = mu + 0.5 * level + rng.normal(0, 0.2, n)  # harder levels run longer than the model says
    rows = [(ids[i], int(np.exp(true[i]))) for i in range(0, n, 4)]
    out, _, seen, fit = combine_with_history(pl.Series(ids), mu, np.full(n, 0.3), _history(rows),
                                             data_source=["s"] * n, difficulty=level)
    assert fit.difficulty_groups == 3 and fit.between_difficulty_sd > 0.2
    unseen = seen == 0
    shift = out[unseen] - (mu[unseen] - mu.mean()) * fit.slope - mu.mean()
    for lv in (1.0, 2.0, 3.0):
        assert abs(np.mean(shift[level[unseen] == lv]) - 0.5 * lv) < 0.15
    for lv in (1.0, 2.0, 3.0):  # monotone within each (source, difficulty) group
        part = unseen & (level == lv)
        assert kendall_tau(out[part], mu[part]) == pytest.approx(1.0)


def test_later_epochs_correct_the_prompts_they_did_not_reach():
    ids, sources, true, mu_model, rng = _mix()
    reached = rng.random(len(ids)) < 0.8
    rows = [(ids[i], int(np.exp(true[i] + rng.normal(0, 0.2)))) for i in np.flatnonzero(reached) for _ in range(2)]
    out, _, seen, _ = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows),
                                           data_source=sources)
    missed = ~reached
    assert (seen[missed] == 0).all()
    assert np.mean(np.abs(out[missed] - true[missed])) < 0.4 < np.mean(np.abs(mu_model[missed] - true[missed]))


def test_the_fit_is_deterministic():
    ids, sources, true, mu_model, rng = _mix()
    rows = [(ids[i], int(np.exp(true[i]))) for i in range(0, len(ids), 9)]
    first = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows), data_source=sources)
    second = combine_with_history(pl.Series(ids), mu_model, np.full(len(ids), 0.3), _history(rows), data_source=sources)
    np.testing.assert_array_equal(first[0], second[0])
    assert first[3].as_dict() == second[3].as_dict()
