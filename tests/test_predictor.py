import json
import zipfile

import numpy as np
import pytest

from _predictor_data import make_data
from asp_cli.predict import model as P
from asp_cli.predict.targets import expected_max_z, group_targets
from asp_cli.errors import InputError, PredictorError, UnsafePredictorError


@pytest.fixture(scope="module")
def fitted():
    prompts, lengths = make_data()
    return prompts, lengths, P.LengthPredictor(min_df=1).fit(prompts, lengths)


def test_fit_learns_the_ranking(fitted):
    from asp_cli.predict.evaluate import kendall_tau

    prompts, lengths, model = fitted
    test_prompts, test_lengths = make_data(n_prompts=60, seed=1)
    mu, sigma, tokens = model.predict_log(test_prompts)
    observed = group_targets(test_lengths)["log_mean"].to_numpy()
    assert kendall_tau(mu, observed) > 0.6
    assert 0.1 < sigma[0] < 0.3  # the pooled within-prompt spread (0.2 in the data)


def test_round_trip_gives_identical_predictions(fitted, tmp_path):
    prompts, _, model = fitted
    path = tmp_path / "m.skops"
    P.save(model, path)
    loaded = P.load(path)
    np.testing.assert_array_equal(model.predict_log(prompts)[0], loaded.predict_log(prompts)[0])
    assert loaded.card()["training"] == model.card()["training"]


def test_training_is_deterministic_with_a_seed():
    prompts, lengths = make_data()
    a = P.LengthPredictor(min_df=1, random_state=3).fit(prompts, lengths)
    b = P.LengthPredictor(min_df=1, random_state=3).fit(prompts, lengths)
    np.testing.assert_array_equal(a.predict_log(prompts)[0], b.predict_log(prompts)[0])
    assert a.training_fingerprint_ == b.training_fingerprint_


def test_truncated_samples_count_above_the_cap():
    prompts, lengths = make_data(n_prompts=12, samples=2)
    plain = group_targets(lengths)
    capped = group_targets(lengths, cap=int(lengths["response_tokens"].min()))
    assert (capped["log_mean"] > plain["log_mean"]).any()
    assert capped["censored"].sum() >= 1


def test_too_little_data_is_an_input_error():
    prompts, lengths = make_data(n_prompts=5)
    with pytest.raises(InputError, match="at least 10"):
        P.LengthPredictor().fit(prompts, lengths)


def test_untrusted_type_is_refused(tmp_path):
    import skops.io as sio

    from collections import OrderedDict

    path = tmp_path / "evil.skops"
    sio.dump({"format_version": 1, "payload": OrderedDict(a=1)}, path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(P.META_MEMBER, json.dumps({"format_version": 1}))
    with pytest.raises(UnsafePredictorError, match="refused to load"):
        P.load(path)


def test_newer_format_and_foreign_files_are_refused(fitted, tmp_path):
    _, _, model = fitted
    path = tmp_path / "m.skops"
    P.save(model, path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(P.META_MEMBER + ".tmp", "")
    newer = tmp_path / "newer.skops"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(newer, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == P.META_MEMBER:
                data = json.dumps({"format_version": P.FORMAT_VERSION + 1}).encode()
            dst.writestr(item, data)
    with pytest.raises(PredictorError, match="newer"):
        P.load(newer)
    texted = tmp_path / "texted.skops"  # a version written as text was said to be none (a hostile-input round)
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(texted, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == P.META_MEMBER:
                data = json.dumps({**json.loads(data), "format_version": "1"}).encode()
            dst.writestr(item, data)
    with pytest.raises(PredictorError, match=r"has a format version that is no version \('1'\); refit it"):
        P.load(texted)
    junk = tmp_path / "junk.skops"
    junk.write_bytes(b"not a zip")
    with pytest.raises(PredictorError, match="not an asp predictor"):
        P.load(junk)
    with pytest.raises(PredictorError, match="no such model"):
        P.load(tmp_path / "missing.skops")


def test_expected_max_of_normals():
    z = expected_max_z(np.array([1, 2, 8]))
    np.testing.assert_allclose(z, [0.0, 0.5642, 1.4236], atol=0.02)


def test_the_compiled_bundled_state_is_what_skops_loads():
    """The bundled model's compiled state (`asp_cli.predict.bundled`, used instead of importing skops) is exactly
    what skops' trusted loading builds from the bundled file, and it is recorded for that file's bytes."""
    import hashlib

    import numpy as np
    import skops.io as sio

    from asp_cli.predict import bundled
    from asp_cli.predict.model import TRUSTED_TYPES
    from asp_cli.predict.prediction import DEFAULT_MODEL

    assert bundled.SHA256 == hashlib.sha256(DEFAULT_MODEL.read_bytes()).hexdigest()
    fast = bundled.state()
    slow = sio.load(DEFAULT_MODEL, trusted=list(TRUSTED_TYPES))
    assert fast.keys() == slow.keys()
    for key in fast:
        if isinstance(fast[key], np.ndarray):
            assert np.array_equal(fast[key], slow[key]) and fast[key].dtype == slow[key].dtype
        else:
            assert fast[key] == slow[key] and type(fast[key]) is type(slow[key])


def test_a_file_of_an_older_feature_set_keeps_its_own_features(fitted, tmp_path):
    """Files from asp-features-1 hold no feature list in their state; the card's list is used instead."""
    prompts, _, model = fitted
    path = tmp_path / "m.skops"
    P.save(model, path)
    card = P.read_card(path)
    state = P._read_state(path)
    state.pop("features"), state.pop("feature_set")
    old = P._from_state(state, card, path)
    assert old.features_ == model.features_
    np.testing.assert_array_equal(old.predict_log(prompts)[0], model.predict_log(prompts)[0])
    card["features"] = ["no_such_feature", "text_score"]
    with pytest.raises(PredictorError, match="damaged"):
        P._from_state(state, card, path)


@pytest.fixture(scope="module")
def fitted_chars():
    prompts, lengths = make_data()
    return prompts, P.LengthPredictor(min_df=1, char_ngrams=True).fit(prompts, lengths)


def test_char_ngrams_fit_predict_and_round_trip(fitted, fitted_chars, tmp_path):
    from asp_cli.predict.evaluate import kendall_tau

    prompts, model = fitted_chars
    card = model.card()
    assert card["features"][-2:] == ["text_score", "char_score"] and card["format_version"] == 2
    assert card["char_ngrams"]["sizes"] == [3, 4] and card["params"]["char_ngrams"] is True
    assert len(model.head_coef_) == len(fitted[2].head_coef_) + 1
    test_prompts, test_lengths = make_data(n_prompts=60, seed=1)
    mu = model.predict_log(test_prompts)[0]
    assert kendall_tau(mu, group_targets(test_lengths)["log_mean"].to_numpy()) > 0.6
    assert not np.allclose(mu, fitted[2].predict_log(test_prompts)[0])  # the char score is used
    path = tmp_path / "chars.skops"
    P.save(model, path)
    state = P._read_state(path)
    assert state is not None and state["char_coef"].dtype == np.float64  # plain data: a NumPy array
    loaded = P.load(path)
    assert loaded.char_ngram_sizes_ == (3, 4) and P.read_card(path)["format_version"] == 2
    np.testing.assert_array_equal(loaded.predict_log(prompts)[0], model.predict_log(prompts)[0])
    state["char_coef"] = state["char_coef"][:-1]
    with pytest.raises(PredictorError, match="damaged"):
        P._from_state(state, P.read_card(path), path)


def test_models_without_char_ngrams_keep_their_format_and_predictions(fitted, tmp_path):
    """Default fits write format 1 with the parameters and state keys they always had; the bundled model loads."""
    from asp_cli.predict.prediction import DEFAULT_MODEL
    from asp_cli.reading import read_prompts
    from util import SAMPLE_PROMPTS

    prompts, _, model = fitted
    path = tmp_path / "m.skops"
    P.save(model, path)
    state = P._read_state(path)
    assert state["format_version"] == 1 and not any(k.startswith("char") for k in state)
    assert "char_ngrams" not in json.loads(state["params"]) and "char_score" not in P.read_card(path)["features"]
    assert P.load(path).char_ngram_sizes_ == ()
    default = P.load(DEFAULT_MODEL)
    assert default.char_ngram_sizes_ == () and P.read_card(DEFAULT_MODEL)["format_version"] == 1
    sample, _ = read_prompts([SAMPLE_PROMPTS])
    mu = default.predict_log(sample)[0]
    # bit for bit what the code before character n-grams (commit 5f0e733) predicted with the bundled model
    assert mu[:5].tolist() == [5.167078928507973, 4.978924197318372, 5.277803574830903, 4.9673946919426,
                               5.308507367399437]
    assert float(mu.sum()) == pytest.approx(19708.29939473353, abs=1e-9)


def test_the_bundled_model_loads_without_importing_skops(tmp_path):
    """Importing skops.io costs seconds (all of scikit-learn, and torch when installed): `asp schedule` with
    the bundled model must not pay it; any other model file goes through skops' trusted loading."""
    import subprocess
    import sys

    from util import SAMPLE_PROMPTS

    code = (
        "import sys\n"
        "from asp_cli.cli.main import app\n"
        "try:\n"
        f"    app(['schedule', {str(SAMPLE_PROMPTS)!r}, '-o', {str(tmp_path / 's.parquet')!r}, '--quiet'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print(sorted(m for m in ('skops', 'skops.io', 'sklearn') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]" and (tmp_path / "s.parquet").is_file()


def test_a_prompt_unlike_the_training_prompts_is_predicted_inside_the_lengths_seen(fitted, tmp_path):
    """A linear head extrapolated without bound: a model fitted on short prompts predicted 1 token for a long one
    unlike them (an [asy] figure among GSM8K-style questions)."""
    import polars as pl

    from asp_cli import columns as C

    prompts, lengths, model = fitted
    lo, hi = model.log_mean_range_
    observed = group_targets(lengths)["log_mean"].to_numpy()
    assert (lo, hi) == (round(float(observed.min()), 6), round(float(observed.max()), 6))
    odd = prompts.head(2).with_columns(pl.Series(C.PROMPT_TEXT, ["prove " * 3000, "[asy] draw((0,0)--(1,1)); " * 400]))
    unclamped = model._head_columns(model._dense(odd, P.F.word_index(odd, model.vocabulary_),
                                                 P.F.prompt_token_counts(odd, None)),
                                    P.F.word_scores(P.F.word_index(odd, model.vocabulary_), model.word_coef_)
                                    + model.word_intercept_)
    assert (unclamped < lo).any() or (unclamped > hi).any()  # the case: outside what training saw
    mu = model.predict_log(odd)[0]
    assert ((mu >= lo) & (mu <= hi)).all()
    path = tmp_path / "m.skops"
    P.save(model, path)
    np.testing.assert_array_equal(P.load(path).predict_log(odd)[0], mu)  # the range travels in the file
