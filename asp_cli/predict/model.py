"""The response-length model: fit on observed rollouts, predict per-prompt length distributions, save and load.

The model predicts, for each prompt, the distribution of the log length of one sample as a normal
``N(mu, sigma^2)`` (lengths are log-normal to a good approximation: within-prompt CV ~0.28 on the AIME
R1-distill data). From it:

- the typical (mean) length is ``exp(mu + sigma^2 / 2)``;
- the expected group maximum of N samples is ``exp(mu + sigma * e_N)`` with ``e_N`` the expected maximum
  of N standard normals (numerical integral), so a model fitted on
  groups of 8 predicts groups of 4 or 16 consistently.

``mu`` comes from a ridge regression (the "head") over a piecewise-linear expansion of the dense prompt
features (each feature plus hinges ``max(0, x - knot)`` at its training quintiles, i.e. a linear spline:
an additive model) and one text score, itself a ridge regression over word counts fitted out of fold
(stacking, Wolpert 1992), so the head learns how far to trust it. With ``char_ngrams=True`` a second text
score over hashed character 3- and 4-grams is fitted the same way and enters the head as one more column
(opt-in: it roughly doubles the predict time). Gradient-boosted trees were tried first
and ranked no better on the evaluation sets while taking ~5 s per million prompts to predict; the spline
head predicts a million prompts in well under a second. ``sigma`` is the pooled within-prompt standard deviation of
log length in the training data, or 0.3 when no prompt has two samples.

Censoring: a sample that hit the generation cap (``truncated`` true, or length >= ``cap``) is only known to
be at least the cap; it enters the targets as ``1.25 x`` its length, the mean excess over a threshold
near the group's upper decile for a log-normal with sigma 0.3 (a fixed, documented imputation, not a Tobit
fit).

Model files are skops archives loaded with an explicit list of trusted types (never pickle), plus an
``asp_meta.json`` member holding the format version and the card, readable without loading the model.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.predict import features as F
from asp_cli.errors import InputError, PredictorError, SettingsError
from asp_cli.output import json_finite
from asp_cli.predict.model_file import (  # noqa: F401 - the file format's names, re-exported here
    FORMAT_VERSION,
    MAX_ABS_FEATURE,
    MAX_ABS_WEIGHT,
    MAX_KNOTS,
    MAX_LOG_SPREAD,
    MAX_RANDOM_STATE,
    MAX_VOCABULARY,
    META_MEMBER,
    MIN_SCALE,
    SCHEMA_MEMBER,
    TRUSTED_TYPES,
    check_array,
    card_count,
    card_of,
    damaged,
    check_number,
    check_params,
    read_archive,
    check_texts,
    trusted_state,
    canonical_archive,
    read_card,
)
from asp_cli.settings import check_count
from asp_cli.predict.targets import group_targets

# Files are written at the oldest version that can read them: 1 without character n-grams, 2 with them, so a
# character n-gram model is refused by an older asp ("upgrade asp") instead of silently losing its n-gram score.
_CHAR_NGRAM_FORMAT_VERSION = 2
_CARD_KEYS = ("format_version", "feature_set", "features", "vocabulary_size", "data_sources",
              "uses_difficulty", "log_spread", "training", "params", "versions", "char_ngrams")
DEFAULT_LOG_SPREAD = 0.3  # within-prompt sd of log length; AIME R1-distill median CV is 0.28
KNOT_QUANTILES = (0.2, 0.4, 0.6, 0.8)  # hinge knots of the piecewise-linear head, at training quantiles



# --------------------------------------------------------------------------------------------------------
# Training data


def fingerprint_observations(prompts: pl.DataFrame, targets: pl.DataFrame) -> str:
    """A stable SHA-256 of the training prompts and their length summaries (order-independent)."""
    joined = prompts.select(C.PROMPT_ID, C.PROMPT_TEXT).join(targets, on=C.PROMPT_ID).sort(C.PROMPT_ID)
    digest = hashlib.sha256()
    for pid, text, n, mx, mean in zip(joined[C.PROMPT_ID], joined[C.PROMPT_TEXT], joined["samples"],
                                      joined["max_tokens"], joined["mean_tokens"], strict=True):
        digest.update(f"{pid}\x1f{text}\x1f{n}\x1f{mx}\x1f{mean:.3f}\x1e".encode())
    return "sha256:" + digest.hexdigest()


# --------------------------------------------------------------------------------------------------------
# The model


class LengthPredictor:
    """Predicts the log-normal distribution of a prompt's response length.

    Parameters follow scikit-learn: ``__init__`` only stores them, ``fit`` returns ``self``, learned state
    ends in ``_``, randomness comes from ``random_state``.
    """

    def __init__(
        self,
        *,
        max_vocabulary: int = 4000,
        min_df: int = 3,
        ridge_alpha: float = 3.0,
        head_alpha: float = 10.0,
        use_metadata: bool = True,
        log_spread: float | None = None,
        char_ngrams: bool = False,
        random_state: int = 0,
    ) -> None:
        self.max_vocabulary = max_vocabulary
        self.min_df = min_df
        self.ridge_alpha = ridge_alpha
        self.head_alpha = head_alpha
        self.use_metadata = use_metadata
        self.log_spread = log_spread
        self.char_ngrams = char_ngrams
        self.random_state = random_state

    def get_params(self) -> dict[str, Any]:
        names = ["max_vocabulary", "min_df", "ridge_alpha", "head_alpha", "use_metadata", "log_spread", "random_state"]
        if self.char_ngrams:  # only then, so files without them keep exactly the parameters they always had
            names.insert(-1, "char_ngrams")
        return {k: getattr(self, k) for k in names}

    # -- fitting -------------------------------------------------------------------------------------------

    def fit(
        self,
        prompts: pl.DataFrame,
        lengths: pl.DataFrame,
        *,
        cap: int | None = None,
        tokenizer: Path | None = None,
    ) -> LengthPredictor:
        """Fit on prompts (``read_prompts`` columns) and observed lengths (``read_lengths`` columns).

        Raises
        ------
        InputError
            When fewer than 10 prompts have observed lengths.
        SettingsError
            A ``random_state`` outside scikit-learn's range, or a ``cap`` that is not a whole number of tokens.
        """
        from sklearn.linear_model import Ridge
        from sklearn.model_selection import KFold

        check_count("--max-response-tokens", cap, minimum=1, optional=True)
        spread = self.log_spread
        if spread is not None and (isinstance(spread, bool) or not isinstance(spread, (int, float))
                                   or not 0.0 <= spread <= MAX_LOG_SPREAD):
            raise SettingsError(f"log_spread must be a number from 0 to {MAX_LOG_SPREAD:g} (got {self.log_spread!r})")
        if not isinstance(self.random_state, int) or not 0 <= self.random_state <= MAX_RANDOM_STATE:
            raise SettingsError(f"--seed must be a whole number from 0 to {MAX_RANDOM_STATE} (got {self.random_state!r})")
        targets = group_targets(lengths, cap=cap)
        data = prompts.join(targets, on=C.PROMPT_ID, how="inner", maintain_order="left")
        if data.height < 10:
            raise InputError(
                f"only {data.height} prompts have observed lengths; the predictor needs at least 10 "
                "(check that the ids of the prompts and the lengths match)"
            )
        y = data["log_mean"].to_numpy()
        samples = data["samples"].to_numpy().astype(np.float64)
        weight = samples / (samples + 1.0)  # more samples, a surer target (normal-normal shrinkage)

        self.vocabulary_ = F.learn_vocabulary(data[C.PROMPT_TEXT], max_words=self.max_vocabulary, min_df=self.min_df)
        words = F.word_index(data, self.vocabulary_)
        matrix = F.word_matrix(words, len(self.vocabulary_))
        # Out-of-fold text scores for the head (stacking, Wolpert 1992), so it learns how far to trust them.
        splits = list(KFold(n_splits=5, shuffle=True, random_state=self.random_state).split(matrix))
        text_score, self.word_coef_, self.word_intercept_ = _stacked_ridge(matrix, y, weight, splits, self.ridge_alpha)
        self.char_ngram_sizes_: tuple[int, ...] = ()
        if self.char_ngrams:
            self.char_ngram_sizes_, self.char_hash_bits_ = F.CHAR_NGRAM_SIZES, F.CHAR_HASH_BITS
            chars = F.char_matrix(data[C.PROMPT_TEXT], self.char_ngram_sizes_, self.char_hash_bits_)
            char_score, self.char_coef_, self.char_intercept_ = _stacked_ridge(
                chars, y, weight, splits, self.ridge_alpha)
            text_score = np.column_stack([text_score, char_score])

        self.sources_: tuple[str, ...] = ()
        if self.use_metadata and C.DATA_SOURCE in data.columns:
            present = data[C.DATA_SOURCE].drop_nulls().unique().sort().to_list()
            if 2 <= len(present) <= 250:
                self.sources_ = tuple(present)
        self.uses_difficulty_ = bool(self.use_metadata and C.DIFFICULTY in data.columns
                                     and data[C.DIFFICULTY].null_count() < data.height)
        self.feature_set_ = F.FEATURE_SET
        skip = {"difficulty"} if not self.uses_difficulty_ else set()
        if not self.sources_:
            skip.add("data_source_code")
        self.features_ = tuple(name for name in F.DENSE_FEATURES if name not in skip)
        tokens = F.prompt_token_counts(data, tokenizer)
        dense = self._dense(data, words, tokens)
        self.fill_ = np.nan_to_num(np.nanmedian(np.where(np.isnan(dense), np.nan, dense), axis=0), nan=0.0)
        filled = np.where(np.isnan(dense), self.fill_, dense)
        self.knots_ = np.quantile(filled, KNOT_QUANTILES, axis=0).T  # (features, knots)
        x = self._expand(dense, text_score)
        self.center_ = np.average(x, axis=0, weights=weight)
        self.scale_ = np.sqrt(np.average((x - self.center_) ** 2, axis=0, weights=weight))
        self.scale_[self.scale_ < 1e-9] = 1.0
        head = Ridge(alpha=self.head_alpha).fit((x - self.center_) / self.scale_, y, sample_weight=weight)
        self.head_coef_ = head.coef_.astype(np.float64)
        self.head_intercept_ = float(head.intercept_)

        multi = data.filter(pl.col("samples") >= 2)
        self.unclamped_log_spread_: float | None = None
        if self.log_spread is not None:
            self.log_spread_ = float(self.log_spread)
        elif multi.height >= 5:
            dof = (multi["samples"] - 1).to_numpy().astype(np.float64)
            var = multi["log_sd"].fill_null(0.0).to_numpy() ** 2
            self.log_spread_ = float(math.sqrt(np.sum(dof * var) / np.sum(dof)))
            if self.log_spread_ > MAX_LOG_SPREAD:
                # Real but extreme data (samples of 1 and 10,000,000 tokens of one prompt): the model file holds
                # at most MAX_LOG_SPREAD, which its reader checks, so fit never writes a file asp then refuses.
                self.unclamped_log_spread_ = self.log_spread_
                self.log_spread_ = MAX_LOG_SPREAD
        else:
            self.log_spread_ = DEFAULT_LOG_SPREAD
        residual = y - self._head(x)
        self.train_rmse_log_ = float(np.sqrt(np.average(residual**2, weights=weight)))
        self.n_prompts_ = int(data.height)
        self.n_samples_ = int(samples.sum())
        self.training_fingerprint_ = fingerprint_observations(data, targets)
        self.max_observed_tokens_ = int(data["max_tokens"].max())
        # The range of the training targets: a linear head extrapolates without bound, so a prompt unlike every
        # training prompt (a long [asy] figure in a model fitted on GSM8K) came out at 1 token. Predictions stay
        # inside what the policy was seen to write (a clip: monotone, so no order changes inside the range).
        self.log_mean_range_: tuple[float, float] | None = (round(float(y.min()), 6), round(float(y.max()), 6))
        self.meta_: dict[str, Any] = {}
        return self

    def _feature_names(self) -> list[str]:
        """The dense features this model uses, fixed at fit time (a file from an older feature set keeps its
        own list, a subset of ``F.DENSE_FEATURES``; metadata only when the training data had it)."""
        return list(self.features_)

    def _dense(self, prompts: pl.DataFrame, words: F.WordIndex, tokens: np.ndarray) -> np.ndarray:
        dense = F.dense_features(prompts, words, tokens, self.sources_)
        self._codes = np.nan_to_num(dense[:, F.DENSE_FEATURES.index("data_source_code")], nan=-1.0)
        names = [n for n in self._feature_names() if n != "data_source_code"]
        return dense[:, [F.DENSE_FEATURES.index(n) for n in names]]

    def _expand(self, dense: np.ndarray, text_score: np.ndarray, prompts: pl.DataFrame | None = None) -> np.ndarray:
        """Piecewise-linear design: each feature, its hinges max(0, x - knot), missing flags, the text score(s)
        (words, then character n-grams when used), sources one-hot."""
        missing = np.isnan(dense)
        filled = np.where(missing, self.fill_, dense)
        hinges = np.maximum(filled[:, :, None] - self.knots_[None, :, :], 0.0).reshape(len(filled), -1)
        parts = [filled, hinges, missing.astype(np.float64), text_score.reshape(len(dense), -1)]
        if self.sources_:
            codes = self._codes
            parts.append((codes[:, None] == np.arange(len(self.sources_))[None, :]).astype(np.float64))
        return np.hstack(parts)

    def _head(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.center_) / self.scale_) @ self.head_coef_ + self.head_intercept_

    def _head_columns(self, dense: np.ndarray, text_score: np.ndarray) -> np.ndarray:
        """``_head(_expand(...))`` one feature at a time: no (prompts x 80) matrix on the predict path."""
        coef = self.head_coef_ / self.scale_
        mu = np.full(len(dense), self.head_intercept_ - float(coef @ self.center_))
        n_features, n_knots = self.knots_.shape
        for f in range(n_features):
            column = dense[:, f]
            missing = np.isnan(column)
            filled = np.where(missing, self.fill_[f], column)
            mu += coef[f] * filled
            for k in range(n_knots):
                mu += coef[n_features + f * n_knots + k] * np.maximum(filled - self.knots_[f, k], 0.0)
            mu += coef[n_features * (1 + n_knots) + f] * missing
        base = n_features * (2 + n_knots)
        scores = text_score.reshape(len(dense), -1)
        for j in range(scores.shape[1]):
            mu += coef[base + j] * scores[:, j]
        base += scores.shape[1] - 1
        if self.sources_:
            mu += np.append(coef[base + 1:], 0.0)[np.where(self._codes >= 0, self._codes, len(self.sources_)).astype(np.int64)]
        return mu

    # -- predicting ----------------------------------------------------------------------------------------

    def predict_log(self, prompts: pl.DataFrame, *, tokenizer: Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(mu, sigma, prompt_tokens)`` per prompt: the log-normal parameters of one sample's length."""
        self._check_fitted()
        if prompts.height == 0:
            empty = np.zeros(0)
            return empty, empty, np.zeros(0, dtype=np.int64)
        words = F.word_index(prompts, self.vocabulary_)
        text_score = F.word_scores(words, self.word_coef_) + self.word_intercept_
        if self.char_ngram_sizes_:
            char_score = F.char_scores(prompts[C.PROMPT_TEXT], self.char_coef_, self.char_ngram_sizes_,
                                       self.char_hash_bits_) + self.char_intercept_
            text_score = np.column_stack([text_score, char_score])
        tokens = F.prompt_token_counts(prompts, tokenizer)
        mu = self._head_columns(self._dense(prompts, words, tokens), text_score)
        if getattr(self, "log_mean_range_", None) is not None:  # files fitted before it hold no range
            mu = np.clip(mu, *self.log_mean_range_)
        sigma = np.full(prompts.height, self.log_spread_)
        return mu, sigma, tokens

    def _check_fitted(self) -> None:
        if not hasattr(self, "head_coef_"):
            raise PredictorError("the predictor is not fitted; call fit() or load a model file")

    # -- describing ----------------------------------------------------------------------------------------

    def card(self) -> dict[str, Any]:
        """What the model is: feature set, training data, versions, figures (JSON-ready)."""
        self._check_fitted()
        import sklearn

        card = {
            "format_version": self._format_version(),
            "feature_set": self.feature_set_,
            "features": self._feature_names() + ["text_score"] + (["char_score"] if self.char_ngram_sizes_ else []),
            "vocabulary_size": len(self.vocabulary_),
            "data_sources": list(self.sources_),
            "uses_difficulty": self.uses_difficulty_,
            "log_spread": round(self.log_spread_, 4),
            "training": {
                "prompts": self.n_prompts_,
                "samples": self.n_samples_,
                "fingerprint": self.training_fingerprint_,
                "train_rmse_log": round(self.train_rmse_log_, 4) if math.isfinite(self.train_rmse_log_) else None,
                "max_observed_tokens": self.max_observed_tokens_,
                **({"log_mean_range": list(self.log_mean_range_)}
                   if getattr(self, "log_mean_range_", None) is not None else {}),
            },
            "params": self.get_params(),
            "versions": {
                "asp": _asp_version(),
                "scikit-learn": sklearn.__version__,
                "numpy": np.__version__,
                "polars": pl.__version__,
            },
        }
        if self.char_ngram_sizes_:
            card["char_ngrams"] = {"sizes": list(self.char_ngram_sizes_), "hash_bits": self.char_hash_bits_,
                                   "hash": "ASCII lower-case; (little-endian window * M_n mod 2^32) >> (32 - bits)",
                                   "multipliers": {str(n): F.CHAR_HASH_MULTIPLIERS[n] for n in self.char_ngram_sizes_}}
        card.update(json_finite(self.meta_))
        return card

    def _format_version(self) -> int:
        return _CHAR_NGRAM_FORMAT_VERSION if self.char_ngram_sizes_ else 1


def _stacked_ridge(matrix, y: np.ndarray, weight: np.ndarray, splits: list, alpha: float):
    """Out-of-fold ridge predictions over ``splits``, and the coefficients and intercept fitted on all rows."""
    from sklearn.linear_model import Ridge

    score = np.zeros(len(y))
    if matrix.shape[1] == 0:
        # No feature at all (no word shared by enough prompts: text without spaces between words, such as
        # Chinese, gives one "word" per prompt): the score is each fold's weighted mean, a constant.
        for train, test in splits:
            score[test] = float(np.average(y[train], weights=weight[train]))
        return score, np.zeros(0, dtype=np.float64), float(np.average(y, weights=weight))
    for train, test in splits:
        ridge = Ridge(alpha=alpha).fit(matrix[train], y[train], sample_weight=weight[train])
        score[test] = ridge.predict(matrix[test])
    ridge = Ridge(alpha=alpha).fit(matrix, y, sample_weight=weight)
    return score, ridge.coef_.astype(np.float64), float(ridge.intercept_)


def _asp_version() -> str:
    from asp_cli import __version__

    return __version__


# --------------------------------------------------------------------------------------------------------
# Files
#
# One loader: skops' trusted loading (`skops.io.loads` with `TRUSTED_TYPES`), after asp's own checks of the
# archive (member sizes from the central directory, JSON nesting, every schema node's type on the list), and
# before asp's checks of every value (finite numbers within bounds, shapes that agree with each other and
# with the card). The bundled default model's state is compiled into asp (`asp_cli.predict.bundled`, made
# from asp_cli/models/default.skops by scripts/compile_bundled_model.py): a file whose bytes have the
# bundled file's SHA-256 is built from it, the same way, because importing skops.io imports all of
# scikit-learn (and torch when installed), seconds per process that `asp schedule` would otherwise pay for
# the model it uses most. Any other bytes go through skops.

def save(model: LengthPredictor, path: Path) -> None:
    """Write ``model`` as a skops archive at ``path``: plain types and NumPy arrays only, byte for byte the same
    for the same model (member names, order and timestamps fixed; see `model_file.canonical_archive`)."""
    import skops.io as sio

    model._check_fitted()
    state = {
        "format_version": model._format_version(),
        "params": json.dumps(model.get_params()),
        "vocabulary": list(model.vocabulary_),
        "word_coef": model.word_coef_,
        "word_intercept": model.word_intercept_,
        "sources": list(model.sources_),
        "uses_difficulty": model.uses_difficulty_,
        "feature_set": model.feature_set_,
        "features": list(model.features_),
        "log_spread": model.log_spread_,
        "fill": model.fill_,
        "knots": model.knots_,
        "center": model.center_,
        "scale": model.scale_,
        "head_coef": model.head_coef_,
        "head_intercept": model.head_intercept_,
        "card": json.dumps(model.card(), sort_keys=True),
    }
    if model.char_ngram_sizes_:
        state.update({"char_ngram_sizes": list(model.char_ngram_sizes_), "char_hash_bits": model.char_hash_bits_,
                      "char_coef": model.char_coef_, "char_intercept": model.char_intercept_})
    card = json.dumps(model.card(), indent=2, sort_keys=True).encode()
    Path(path).write_bytes(canonical_archive(sio.dumps(state), card))


def load(path: Path) -> LengthPredictor:
    """Load a model file with skops' trusted loading, building only the types in ``TRUSTED_TYPES``, and check it.

    Raises
    ------
    UnsafePredictorError
        The file asks for a type outside the trusted list (it is not loaded).
    PredictorError
        Missing, corrupt, newer-format, oversized or poisoned files (NaN, infinite or absurd numbers, shapes
        that do not agree with each other or with the card).
    """
    path = Path(path)
    data, archive = read_archive(path)
    with archive:
        card = card_of(archive, path)
        from asp_cli.predict import bundled

        if hashlib.sha256(data).hexdigest() == bundled.SHA256:
            state = bundled.state()
        else:
            state = trusted_state(data, archive, path)
    return _from_state(state, card, path)


def _read_state(path: Path) -> dict[str, Any]:
    """A model file's state as skops' trusted loading builds it (for tests and tools; `load` checks it)."""
    path = Path(path)
    data, archive = read_archive(path)
    with archive:
        card_of(archive, path)
        return trusted_state(data, archive, path)


def _from_state(state: Any, card: dict[str, Any], path: Path) -> LengthPredictor:
    """Build a model from a state dict, checking every value; errors name the file and the key (exit 5)."""
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise damaged(path, "the state is not a mapping")
    if state.get("format_version") != card["format_version"]:
        raise damaged(path, "the state's format version differs from the card's")
    try:
        model = LengthPredictor(**check_params(state, path))
    except TypeError:
        raise damaged(path, "'params'") from None
    model.vocabulary_ = check_texts(state, "vocabulary", path, most=MAX_VOCABULARY)
    model.word_coef_ = check_array(state, "word_coef", path, ndim=1, bound=MAX_ABS_WEIGHT)
    model.word_intercept_ = check_number(state, "word_intercept", path, low=-MAX_ABS_WEIGHT, high=MAX_ABS_WEIGHT)
    model.sources_ = check_texts(state, "sources", path, most=10_000)
    if not isinstance(state.get("uses_difficulty"), bool):
        raise damaged(path, "'uses_difficulty' is not true or false")
    model.uses_difficulty_ = state["uses_difficulty"]
    # Files before asp-features-2 hold no feature list in the state; their card names the features.
    if "features" in state:
        names = state["features"]
    else:  # a card's features of another kind (null, a number) is a damaged file, not a TypeError (exit 70)
        listed = card.get("features", [])
        names = [n for n in listed if n != "text_score"] if isinstance(listed, list) else listed
    model.features_ = check_texts({"features": names}, "features", path, most=len(F.DENSE_FEATURES))
    feature_set = state.get("feature_set", card.get("feature_set", ""))
    if not isinstance(feature_set, str):
        raise damaged(path, "'feature_set' is not text")
    model.feature_set_ = feature_set
    if not model.features_ or any(n not in F.DENSE_FEATURES for n in model.features_):
        raise damaged(path, "'features' names features this asp does not compute")
    model.log_spread_ = check_number(state, "log_spread", path, low=0.0, high=MAX_LOG_SPREAD)
    model.fill_ = check_array(state, "fill", path, ndim=1, bound=MAX_ABS_FEATURE)
    model.knots_ = check_array(state, "knots", path, ndim=2, bound=MAX_ABS_FEATURE)
    model.center_ = check_array(state, "center", path, ndim=1, bound=MAX_ABS_FEATURE)
    model.scale_ = check_array(state, "scale", path, ndim=1, bound=MAX_ABS_FEATURE, low=MIN_SCALE)
    model.head_coef_ = check_array(state, "head_coef", path, ndim=1, bound=MAX_ABS_WEIGHT)
    model.head_intercept_ = check_number(state, "head_intercept", path, low=-MAX_ABS_WEIGHT, high=MAX_ABS_WEIGHT)
    model.char_ngram_sizes_ = ()
    if "char_coef" in state:  # format 2: character n-grams (files without them hold none of these keys)
        sizes = state.get("char_ngram_sizes")
        bits = state.get("char_hash_bits")
        if (not isinstance(sizes, list) or not sizes or any(not isinstance(n, int) or isinstance(n, bool)
                                                           or n not in F.CHAR_HASH_MULTIPLIERS for n in sizes)
                or len(set(sizes)) != len(sizes)):
            raise damaged(path, "'char_ngram_sizes'")
        if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 24:
            raise damaged(path, "'char_hash_bits'")
        model.char_ngram_sizes_ = tuple(sizes)
        model.char_hash_bits_ = bits
        model.char_coef_ = check_array(state, "char_coef", path, ndim=1, bound=MAX_ABS_WEIGHT)
        model.char_intercept_ = check_number(state, "char_intercept", path, low=-MAX_ABS_WEIGHT, high=MAX_ABS_WEIGHT)
        if len(model.char_coef_) != 1 << bits:
            raise damaged(path, "'char_coef' does not hold one weight per hash bucket")
    head_features = [n for n in model.features_ if n != "data_source_code"]
    n_scores = 2 if model.char_ngram_sizes_ else 1
    n_knots = model.knots_.shape[1]
    if len(model.word_coef_) != len(model.vocabulary_):
        raise damaged(path, "'word_coef' does not hold one weight per vocabulary word")
    if (model.knots_.shape[0] != len(head_features) or not 1 <= n_knots <= MAX_KNOTS
            or len(model.fill_) != len(head_features)):
        raise damaged(path, "'knots' and 'fill' do not match the features")
    if np.any(np.diff(model.knots_, axis=1) < 0):
        raise damaged(path, "'knots' are not in increasing order")
    width = len(head_features) * (2 + n_knots) + n_scores + len(model.sources_)
    if not len(model.head_coef_) == len(model.center_) == len(model.scale_) == width:
        raise damaged(path, "'head_coef', 'center' and 'scale' do not match the features")
    _check_card(model, card, path)
    training = card.get("training", {})
    if not isinstance(training, dict):
        raise damaged(path, "the card's 'training' is not an object")
    model.n_prompts_ = card_count(training, "prompts", path)
    model.n_samples_ = card_count(training, "samples", path)
    model.training_fingerprint_ = str(training.get("fingerprint", ""))
    rmse = training.get("train_rmse_log")
    rmse = float("nan") if rmse is None else rmse  # not recorded: None in the card (JSON has no NaN)
    if isinstance(rmse, bool) or not isinstance(rmse, (int, float)) or (math.isfinite(rmse) and rmse < 0):
        raise damaged(path, "the card's 'train_rmse_log'")
    model.train_rmse_log_ = float(rmse)
    model.max_observed_tokens_ = card_count(training, "max_observed_tokens", path)
    model.log_mean_range_ = None
    if "log_mean_range" in training:
        bounds = training["log_mean_range"]
        if (not isinstance(bounds, list) or len(bounds) != 2
                or any(isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b)
                       or abs(b) > MAX_ABS_WEIGHT for b in bounds) or bounds[0] > bounds[1]
                # Log token counts the training saw: at least 0 (one token) and at most its longest sample's (a
                # hand-edited [-5, -4] put every prompt at 1 token, [30, 31] every one at the cap: a hostile round).
                or bounds[0] < -1e-6 or bounds[1] > math.log(max(model.max_observed_tokens_, 1)) + 1e-6):
            raise damaged(path, "the card's 'log_mean_range'")
        model.log_mean_range_ = (float(bounds[0]), float(bounds[1]))
    model.meta_ = {k: v for k, v in card.items() if k not in _CARD_KEYS}
    return model


def _check_card(model: LengthPredictor, card: dict[str, Any], path: Path) -> None:
    """The card describes the model it sits beside: the same vocabulary size, features and sources."""
    expected = list(model.features_) + ["text_score"] + (["char_score"] if model.char_ngram_sizes_ else [])
    checks = {
        "vocabulary_size": len(model.vocabulary_),
        "features": expected,
        "data_sources": list(model.sources_),
    }
    for key, value in checks.items():
        if key in card and card[key] != value:
            raise damaged(path, f"the card's {key!r} does not match the model")
    if "log_spread" in card and (not isinstance(card["log_spread"], (int, float))
                                 or abs(card["log_spread"] - model.log_spread_) > 1e-4):
        raise damaged(path, "the card's 'log_spread' does not match the model")
