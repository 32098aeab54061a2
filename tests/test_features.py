import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.predict import features as F


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


def _slow_char_buckets(text, size, bits=F.CHAR_HASH_BITS):
    """The documented hash, one window at a time in pure Python: the reference for the vectorised one."""
    raw = bytes(b + 32 if 65 <= b <= 90 else b for b in text.encode("utf-8"))
    out = []
    for i in range(len(raw) - size + 1):
        value = int.from_bytes(raw[i:i + size], "little")
        out.append(((value * F.CHAR_HASH_MULTIPLIERS[size]) % (1 << 32)) >> (32 - bits))
    return out


def test_char_ngram_hash_matches_a_slow_reference_within_prompts():
    texts = ["Find x", "", "é∑", "ab", "ÀBC déf ∫∑ 12", "abcd", "Z"]  # multi-byte UTF-8, prompts shorter than a window
    data, offsets = F._text_bytes(pl.Series(texts))
    assert bytes(data) == "".join(texts).encode("utf-8")
    for size, buckets in zip((3, 4), F._hashed_windows(data, offsets, (3, 4), F.CHAR_HASH_BITS), strict=True):
        for i, text in enumerate(texts):
            inside = buckets[offsets[i]:offsets[i + 1]]
            expected = _slow_char_buckets(text, size)
            assert inside[:len(expected)].tolist() == expected
            assert (inside[len(expected):] == 1 << F.CHAR_HASH_BITS).all()  # windows crossing into the next prompt
    # fixed values: the hash must never change meaning (model files store weights by bucket)
    assert _slow_char_buckets("abc", 3) == [int(F._hashed_windows(*F._text_bytes(pl.Series(["ABC"])), (3,), 18)[0][0])]
    assert F._hashed_windows(*F._text_bytes(pl.Series(["abcd"])), (3, 4), 18)[1][0] == 206_713


def test_char_scores_match_the_sparse_matrix_and_chunks(monkeypatch):
    texts = pl.Series(["Find all $x$", "", "é∑ abc", None, "Prove that 2+2=4.", "ab"])
    coef = np.random.default_rng(0).standard_normal(1 << F.CHAR_HASH_BITS)
    matrix = F.char_matrix(texts)
    assert matrix.shape == (6, 1 << F.CHAR_HASH_BITS)
    whole = F.char_scores(texts, coef)
    np.testing.assert_allclose(whole, matrix @ coef, rtol=1e-5, atol=1e-6)
    assert whole[1] == whole[3] == whole[5] == 0.0  # empty, null, and shorter than every window
    monkeypatch.setattr(F, "_CHAR_CHUNK_ROWS", 2)
    np.testing.assert_array_equal(F.char_scores(texts, coef), whole)
    counts = F.char_ngram_counts(F._text_bytes(texts)[1], (3, 4))
    assert counts.tolist() == [10 + 9, 0, 7 + 6, 0, 15 + 14, 0]


def test_a_tokenizer_path_that_is_missing_or_a_folder_names_the_fix(tmp_path):
    """`asp schedule --tokenizer MODEL_DIR` said `cannot read the tokenizer (Is a directory)`, a missing one
    `(No such file or directory)`: both now say what --tokenizer takes, as asp observe's E11 line does, and a
    folder holding a tokenizer.json (a model's own) names it."""
    import pytest
    from typer.testing import CliRunner

    from asp_cli.cli.main import app
    from asp_cli.errors import InputError

    (tmp_path / "model").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "model" / "tokenizer.json").write_text("{}", encoding="utf-8")
    assert F.tokenizer_path_problem(tmp_path / "model" / "tokenizer.json") is None
    assert F.tokenizer_path_problem(tmp_path / "nope.json") == (
        f"{tmp_path / 'nope.json'}: no such file; --tokenizer names a local tokenizer.json")
    assert F.tokenizer_path_problem(tmp_path / "empty") == (
        f"{tmp_path / 'empty'}: a folder; --tokenizer names a local tokenizer.json")
    with pytest.raises(InputError, match="pass --tokenizer .*model/tokenizer.json$"):
        F.load_tokenizer(tmp_path / "model")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"question": "hi"}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"),
                                      "--tokenizer", str(tmp_path / "model")])
    assert result.exit_code == 3, result.output
    assert result.stderr == (f"Error: {tmp_path / 'model'}: a folder; --tokenizer names the tokenizer.json file: "
                             f"pass --tokenizer {tmp_path / 'model' / 'tokenizer.json'}\n")
