import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli import features as F


def _frame(texts):
    return pl.DataFrame({C.PROMPT_TEXT: texts})


def test_vocabulary_is_deterministic_and_frequency_ordered():
    texts = pl.Series(["b a", "a c", "a b", "d"])
    assert F.learn_vocabulary(texts, min_df=1) == ("a", "b", "c", "d")
    assert F.learn_vocabulary(texts, min_df=2) == ("a", "b")


def test_word_scores_match_the_sparse_matrix():
    vocab = ("find", "prove", "$x$")
    frame = _frame(["Find $x$ find", "", "prove it", "nothing known"])
    words = F.word_index(frame, vocab)
    coef = np.array([1.0, 2.0, 3.0])
    dense = F.word_matrix(words, len(vocab)) @ coef
    np.testing.assert_allclose(F.word_scores(words, coef), dense)
    assert F.word_scores(words, coef)[1] == 0.0


def test_dense_features_shape_and_metadata():
    frame = _frame(["What is $\\frac{1}{2}$?", "Sum 12 and 3456"]).with_columns(
        pl.Series(C.DATA_SOURCE, ["gsm", "other"]), pl.Series(C.DIFFICULTY, [1.0, None]))
    words = F.word_index(frame, ("what",))
    tokens = F.prompt_token_counts(frame)
    dense = F.dense_features(frame, words, tokens, sources=("gsm",))
    assert dense.shape == (2, len(F.DENSE_FEATURES))
    col = {name: dense[:, i] for i, name in enumerate(F.DENSE_FEATURES)}
    assert col["n_dollar"].tolist() == [2, 0]
    assert col["n_numbers"].tolist() == [2, 2]
    assert col["data_source_code"][0] == 0 and np.isnan(col["data_source_code"][1])
    assert np.isnan(col["difficulty"][1])
    assert (tokens >= 1).all()


def test_question_cues_and_periods_are_counted():
    frame = _frame(["Prove that x. Find all y. How many are there?", "Compute 1.5 + 2"])
    words = F.word_index(frame, ("x",))
    dense = F.dense_features(frame, words, F.prompt_token_counts(frame))
    col = {name: dense[:, i] for i, name in enumerate(F.DENSE_FEATURES)}
    assert col["n_ask"].tolist() == [3, 0]
    assert col["n_period"].tolist() == [2, 1]
    assert col["n_numbers"].tolist() == [0, 3]
    assert words.index.dtype == np.uint32
