"""Prompt features for the length predictor, computed with vectorised Polars expressions and NumPy.

Two kinds of features:

- **dense** features, one row per prompt: token count, characters, words, lines, numbers, LaTeX and
  formula marks, chat structure (``n_messages``), difficulty and a data-source code when present;
- **words**: counts of the words of a learned vocabulary (lower-cased, split on whitespace), scaled by
  ``1/sqrt(number of words)``. The predictor turns them into one score with a linear model; on the predict
  path that score is a gather and a segment sum over the exploded words, with no sparse matrix built;
- **character n-grams** (opt-in, ``LengthPredictor(char_ngrams=True)``): hashed counts of every 3- and 4-byte
  window of the UTF-8 text, computed with NumPy on one byte buffer (``char_ngram_buckets``), scored the same
  way as the words.

Why a learned vocabulary and not a hashing trick: Polars' ``hash`` is only stable within one Polars version,
so hashed buckets written into a model file could silently change meaning after an upgrade, and hashing
in Python is far too slow for a million prompts. Casting the exploded words to a ``pl.Enum`` of the
vocabulary costs the same as hashing and is stable. Character n-grams use their own fixed hash (below), not
Polars'; they are opt-in because they cost about as much again as the whole default predict path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli import limits
from asp_cli.errors import InputError, missing_hint, stdin_said

FEATURE_SET = "asp-features-2"

# OpenAI's rule of thumb: about 4 characters per token of English. LaTeX-heavy math tokenizes a little
# denser; pass --tokenizer for exact counts.
BYTES_PER_TOKEN = 4.0

# Literal marks counted per prompt: formulae and structure (cheap: one pass each, run in parallel).
_LITERAL_COUNTS: tuple[tuple[str, str], ...] = (
    ("n_dollar", "$"),
    ("n_backslash", "\\"),
    ("n_frac", "\\frac"),
    ("n_equals", "="),
    ("n_caret", "^"),
    ("n_comma", ","),
    ("n_question", "?"),
    ("n_newline", "\n"),
    ("n_period", "."),  # asp-features-2: sentences (and decimals); one byte, as cheap as the marks above
)

# asp-features-2: what the question asks for ("Prove", "Find all", "How many"), case-sensitive pieces that
# match both capitalisations. One regex alternation (a SIMD literal search) costs about 0.1 s per million
# prompts on 1 core; three separate multi-byte literal counts cost about 1 s.
_ASK = r"rove|ind all|ow many"

DENSE_FEATURES: tuple[str, ...] = (
    "log_prompt_tokens",
    "log_chars",
    "log_words",
    *(name for name, _ in _LITERAL_COUNTS),
    "n_numbers",
    "n_ask",
    "n_messages",
    "difficulty",
    "data_source_code",
)


@dataclass(frozen=True)
class WordIndex:
    """The exploded words of a batch of prompts: vocabulary index per word and words per prompt."""

    index: np.ndarray  # uint32 (half the memory of int64), one per word occurrence, len(vocabulary) outside it
    counts: np.ndarray  # int64, words per prompt

    @property
    def offsets(self) -> np.ndarray:
        offsets = np.zeros(len(self.counts), dtype=np.int64)
        np.cumsum(self.counts[:-1], out=offsets[1:])
        return offsets


def _words_expr() -> pl.Expr:
    return pl.col(C.PROMPT_TEXT).str.to_lowercase().str.split(" ")


def learn_vocabulary(texts: pl.Series, *, max_words: int = 4000, min_df: int = 3) -> tuple[str, ...]:
    """The ``max_words`` most frequent words by document frequency (at least ``min_df`` prompts).

    Ties break by the word itself, so the vocabulary is deterministic.
    """
    frame = pl.DataFrame({C.PROMPT_TEXT: texts})
    counts = (
        frame.lazy()
        .with_row_index("\x00doc")
        .select("\x00doc", _words_expr().alias("word"))
        .explode("word")
        .filter(pl.col("word").str.len_bytes() > 0)
        .unique(["\x00doc", "word"])
        .group_by("word")
        .agg(pl.len().alias("df"))
        .filter(pl.col("df") >= min_df)
        .sort(["df", "word"], descending=[True, False])
        .head(max_words)
        .collect()
    )
    return tuple(counts["word"].to_list())


def word_index(prompts: pl.DataFrame, vocabulary: Sequence[str]) -> WordIndex:
    """Explode each prompt into words and look each word up in ``vocabulary`` (stable; no hashing)."""
    enum = pl.Enum(list(vocabulary))
    # split(" ") yields one more piece than there are spaces: counting spaces is far cheaper than list.len().
    counts = (
        prompts.select(pl.col(C.PROMPT_TEXT).str.count_matches(" ", literal=True) + 1)
        .to_series().to_numpy().astype(np.int64)
    )
    index = (
        prompts.lazy()
        .select(_words_expr().explode().cast(enum, strict=False).to_physical().cast(pl.UInt32)
                .fill_null(len(vocabulary)))
        .collect()
        .to_series()
        .to_numpy()
    )
    return WordIndex(index=index, counts=counts)


def word_matrix(words: WordIndex, n_vocabulary: int):
    """Sparse (prompts x vocabulary) counts scaled by 1/sqrt(words in the prompt), for training."""
    from scipy import sparse

    rows = np.repeat(np.arange(len(words.counts)), words.counts)
    keep = words.index < n_vocabulary
    scale = 1.0 / np.sqrt(np.maximum(words.counts, 1))
    matrix = sparse.csr_matrix(
        (scale[rows[keep]], (rows[keep], words.index[keep])), shape=(len(words.counts), n_vocabulary)
    )
    matrix.sum_duplicates()
    return matrix


def word_scores(words: WordIndex, coef: np.ndarray) -> np.ndarray:
    """``word_matrix(words) @ coef`` without building the matrix: a gather and a segment sum."""
    # float32 per word occurrence (tens of millions for a million prompts) halves the memory touched; sums of
    # a prompt's few hundred words keep about 6 significant digits, far below the model's error.
    weights = np.append(np.asarray(coef, dtype=np.float32), np.float32(0.0))  # last slot: outside the vocabulary
    values = weights[words.index]
    totals = np.zeros(len(words.counts), dtype=np.float64)
    nonempty = words.counts > 0
    if values.size:
        sums = np.add.reduceat(values, words.offsets[nonempty], dtype=np.float64) if nonempty.any() else np.zeros(0)
        totals[nonempty] = sums
    return totals / np.sqrt(np.maximum(words.counts, 1))


# --------------------------------------------------------------------------------------------------------
# Character n-grams: a fixed, documented hash over UTF-8 bytes, vectorised with NumPy.
#
# Each window of n bytes (n = 3 or 4, windows never cross prompts) is read as a little-endian unsigned integer
# v = b0 + 256 b1 + 65536 b2 (+ 2^24 b3), after ASCII lower-casing (A-Z -> a-z; other bytes, including every
# byte of a multi-byte UTF-8 character, are left alone). Its bucket is Knuth's multiplicative hash
#     bucket = ((v * M_n) mod 2^32) >> (32 - bits)
# with one odd 32-bit multiplier per n, so 3-grams and 4-grams share the buckets but collide independently.
# This is written down here and in docs/predictor.md, and depends on no library's hash, so a model file's
# buckets keep their meaning across versions of Python, NumPy and Polars.

CHAR_NGRAM_SIZES: tuple[int, ...] = (3, 4)
CHAR_HASH_BITS = 18  # 262,144 buckets: about 250 windows per prompt, a few per bucket in 100k-prompt training sets
# 2654435769 = floor(2^32 / golden ratio) (Knuth's Fibonacci hashing); 2246822519 = MurmurHash3's PRIME32_2.
CHAR_HASH_MULTIPLIERS: dict[int, int] = {3: 0x9E3779B9, 4: 0x85EBCA77}
# Rows per NumPy pass: about 20 bytes of temporaries per text byte, so 65,536 prompts of ~260 bytes stay near
# 350 MB whatever the number of prompts.
_CHAR_CHUNK_ROWS = 65_536


def _text_bytes(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of all texts as one uint8 buffer, and int64 offsets (len(texts) + 1) into it."""
    array = texts.fill_null("").cast(pl.String).to_arrow()
    if hasattr(array, "combine_chunks"):
        array = array.combine_chunks()
    import pyarrow as pa

    if array.type != pa.large_string():
        array = array.cast(pa.large_string())
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset: array.offset + len(array) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    data = data[offsets[0]: offsets[-1]]
    return data, offsets - offsets[0]


def _hashed_windows(data: np.ndarray, offsets: np.ndarray, sizes: Sequence[int], bits: int) -> list[np.ndarray]:
    """Per size, the bucket of the window starting at every byte; ``2**bits`` where it runs past its prompt's end."""
    padded = np.zeros(len(data) + 4, dtype=np.uint8)
    np.copyto(padded[: len(data)], data)
    padded[(padded - np.uint8(65)) < np.uint8(26)] += np.uint8(32)  # A-Z -> a-z (a uint8 wrap-around compare)
    # Every 4-byte window at once: an unaligned little-endian view with a 1-byte stride, copied once.
    windows = np.ndarray(shape=(len(data),), dtype="<u4", buffer=padded, offset=0, strides=(1,)).copy()
    starts, ends = offsets[:-1], offsets[1:]
    out = []
    for size in sizes:
        if size not in CHAR_HASH_MULTIPLIERS:
            raise ValueError(f"character n-grams of {size} bytes are not supported (only {sorted(CHAR_HASH_MULTIPLIERS)})")
        values = windows & np.uint32((1 << (8 * size)) - 1) if size < 4 else windows.copy()
        values *= np.uint32(CHAR_HASH_MULTIPLIERS[size])
        values >>= np.uint32(32 - bits)
        for back in range(1, size):  # the last size-1 windows of each prompt run past its end
            where = ends - back
            values[where[where >= starts]] = np.uint32(1 << bits)
        out.append(values)
    return out


def char_ngram_counts(offsets: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Character n-grams per prompt (windows inside the prompt, over all sizes)."""
    lengths = np.diff(offsets)
    return sum(np.maximum(lengths - size + 1, 0) for size in sizes)


def char_matrix(texts: pl.Series, sizes: Sequence[int] = CHAR_NGRAM_SIZES, bits: int = CHAR_HASH_BITS):
    """Sparse (prompts x 2**bits) hashed n-gram counts scaled by 1/sqrt(n-grams in the prompt), for training."""
    from scipy import sparse

    data, offsets = _text_bytes(texts)
    n = len(offsets) - 1
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    scale = 1.0 / np.sqrt(np.maximum(char_ngram_counts(offsets, sizes), 1))
    parts_rows, parts_cols = [], []
    for buckets in _hashed_windows(data, offsets, sizes, bits):
        keep = buckets < (1 << bits)
        parts_rows.append(rows[keep])
        parts_cols.append(buckets[keep].astype(np.int64))
    row = np.concatenate(parts_rows) if parts_rows else np.zeros(0, np.int64)
    col = np.concatenate(parts_cols) if parts_cols else np.zeros(0, np.int64)
    matrix = sparse.csr_matrix((scale[row], (row, col)), shape=(n, 1 << bits))
    matrix.sum_duplicates()
    return matrix


def char_scores(texts: pl.Series, coef: np.ndarray, sizes: Sequence[int] = CHAR_NGRAM_SIZES,
                bits: int = CHAR_HASH_BITS) -> np.ndarray:
    """``char_matrix(texts) @ coef`` without building the matrix: per row chunk, a gather and a segment sum."""
    weights = np.append(np.asarray(coef, dtype=np.float32), np.float32(0.0))  # last slot: window past the end
    out = np.zeros(len(texts), dtype=np.float64)
    for start in range(0, len(texts), _CHAR_CHUNK_ROWS):
        data, offsets = _text_bytes(texts.slice(start, _CHAR_CHUNK_ROWS))
        if len(data) == 0:
            continue
        values = np.zeros(len(data), dtype=np.float32)
        for buckets in _hashed_windows(data, offsets, sizes, bits):
            values += weights[buckets]
        nonempty = np.diff(offsets) > 0
        totals = np.zeros(len(offsets) - 1, dtype=np.float64)
        # float32 sums over a prompt's few hundred windows keep about 6 significant digits (as for the words).
        totals[nonempty] = np.add.reduceat(values, offsets[:-1][nonempty])
        out[start: start + len(totals)] = totals / np.sqrt(np.maximum(char_ngram_counts(offsets, sizes), 1))
    return out


def prompt_token_counts(prompts: pl.DataFrame, tokenizer: Path | None = None) -> np.ndarray:
    """Prompt tokens: exact with a local Hugging Face ``tokenizer.json``, else bytes / 4 (at least 1)."""
    if tokenizer is None:
        return (
            prompts.select((pl.col(C.PROMPT_TEXT).str.len_bytes() / BYTES_PER_TOKEN).ceil().clip(1).cast(pl.Int64))
            .to_series()
            .to_numpy()
        )
    loaded = load_tokenizer(tokenizer)
    texts = prompts[C.PROMPT_TEXT].to_list()
    counts = [len(e.ids) for e in encode_texts(loaded, texts, tokenizer)]
    return np.maximum(np.asarray(counts, dtype=np.int64), 1)


def encode_texts(loaded: Any, texts: list[str], path: Path | str) -> list[Any]:
    """``texts`` encoded by a loaded tokenizer. A tokenizer that loads but cannot encode (a WordLevel model whose
    unknown token is not in its vocabulary) raised the tokenizers library's bare Exception: exit 70, a hostile-input
    round; it is the file's fault, exit 3."""
    try:
        return loaded.encode_batch(texts, add_special_tokens=False)
    except Exception as exc:  # noqa: BLE001 - the library raises Exception itself
        raise InputError(f"{path}: the tokenizer cannot encode the text ({str(exc)[:200]}); give the tokenizer.json "
                         "of the model you train") from None


def tokenizer_path_problem(path: Path | str) -> str | None:
    """What is wrong with ``--tokenizer PATH`` before it is read (E11), or None: a missing path, or a folder, which
    a newcomer gives for the model's own (naming the ``tokenizer.json`` inside it where there is one)."""
    path = Path(path)
    if stdin_said(path):  # `--tokenizer -` was "no such file" (E129)
        return f"--tokenizer {stdin_said(path)}"
    if path.is_file():
        return None
    if not path.exists():
        return f"{path}: no such file" + (missing_hint(path) or "; --tokenizer names a local tokenizer.json")
    inside = path / "tokenizer.json"
    if path.is_dir() and inside.is_file():
        return f"{path}: a folder; --tokenizer names the tokenizer.json file: pass --tokenizer {inside}"
    return f"{path}: {'a folder' if path.is_dir() else 'not a file'}; --tokenizer names a local tokenizer.json"


def load_tokenizer(path: Path | str) -> Any:
    """A local Hugging Face ``tokenizer.json``, its JSON checked for nesting (`asp_cli.limits`) before the
    tokenizers library parses it.

    Raises
    ------
    InputError
        Without the `tokenizers` package, or when the file is missing, too deeply nested or not a tokenizer.
    """
    if (problem := tokenizer_path_problem(path)) is not None:
        raise InputError(problem)
    try:
        from tokenizers import Tokenizer  # optional dependency, imported only when asked for
    except ImportError:
        raise InputError(
            "--tokenizer needs the `tokenizers` package; install it (pip install tokenizers) or drop --tokenizer"
        ) from None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the tokenizer ({exc.strerror or type(exc).__name__})") from None
    limits.check_json_depth(data, str(path), InputError)
    try:
        return Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - any failure means the file is not a tokenizer
        raise InputError(f"{path}: not a Hugging Face tokenizer.json ({str(exc)[:200]})") from None


def dense_features(
    prompts: pl.DataFrame,
    words: WordIndex,
    prompt_tokens: np.ndarray,
    sources: Sequence[str] = (),
) -> np.ndarray:
    """The dense feature matrix (float64, columns in ``DENSE_FEATURES`` order; NaN where unknown).

    ``sources`` is the data-source vocabulary learned at fit time; a source outside it, or none, is NaN.
    """
    text = pl.col(C.PROMPT_TEXT)
    exprs = [
        text.str.len_chars().cast(pl.Float64).log1p().alias("log_chars"),
        *(text.str.count_matches(mark, literal=True).cast(pl.Float64).alias(name) for name, mark in _LITERAL_COUNTS),
        # ASCII digits: Unicode \d costs 1.7x as much per million prompts and matches the same math text.
        text.str.count_matches(r"[0-9]+").cast(pl.Float64).alias("n_numbers"),
        text.str.count_matches(_ASK).cast(pl.Float64).alias("n_ask"),
    ]
    schema = prompts.schema
    exprs.append(
        (pl.col(C.N_MESSAGES).cast(pl.Float64) if C.N_MESSAGES in schema else pl.lit(1.0)).alias("n_messages")
    )
    difficulty = pl.col(C.DIFFICULTY).cast(pl.Float64) if C.DIFFICULTY in schema else pl.lit(None, pl.Float64)
    # An infinite difficulty (JSON's Infinity) is no level: unknown, as a missing one is.
    exprs.append(pl.when(difficulty.is_finite()).then(difficulty).otherwise(None).alias("difficulty"))
    if sources and C.DATA_SOURCE in schema:
        code = pl.col(C.DATA_SOURCE).cast(pl.String).replace_strict(
            list(sources), list(range(len(sources))), default=None, return_dtype=pl.Float64
        )
    else:
        code = pl.lit(None, pl.Float64)
    exprs.append(code.alias("data_source_code"))
    frame = prompts.lazy().select(exprs).collect().with_columns(
        pl.Series("log_prompt_tokens", np.log1p(prompt_tokens.astype(np.float64))),
        pl.Series("log_words", np.log1p(words.counts.astype(np.float64))),
    )
    return frame.select(DENSE_FEATURES).to_numpy().astype(np.float64)


def count_text_tokens(texts: list[str | None], tokenizer: str | Path | None,
                      bytes_per_token: float) -> tuple[list[int | None], list[bool]]:
    """Each text's token count (None for a missing one): by ``tokenizer`` (a local ``tokenizer.json``), else
    estimated at ``bytes_per_token``; and whether it holds one of the tokenizer's special tokens (an end-of-sequence
    token written out: a response decoded with its special tokens, as OpenRLHF hands one to its reward function,
    counted whole; verl's dumps drop them, one short). Without a tokenizer none is said to hold one."""
    if tokenizer is None:
        return ([None if t is None else max(1, round(len(t.encode("utf-8")) / bytes_per_token)) for t in texts],
                [False] * len(texts))
    loaded = load_tokenizer(tokenizer)
    special = {i for i, token in loaded.get_added_tokens_decoder().items() if token.special}
    present = iter(encode_texts(loaded, [t for t in texts if t is not None], tokenizer))
    encoded = [None if t is None else next(present).ids for t in texts]
    return ([None if ids is None else len(ids) for ids in encoded],
            [ids is not None and any(i in special for i in ids) for ids in encoded])
