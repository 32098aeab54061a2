"""Prompt files: the prompt text, id and metadata of every row, found by column names (README, "Make a schedule")."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from asp_cli import columns as C
from asp_cli import limits
from asp_cli.errors import InputError, shown_id
from asp_cli.reading.json_records import CHAT_CONTENT, JSON_TAG, flatten_content_parts, untag, untag_value
from asp_cli.reading.json_records import EXACT_FLOAT as _EXACT_FLOAT
from asp_cli.reading.options import DEFAULT_READ, OnBadRow, ReadOptions
from asp_cli.reading.tables import (
    BAD_ROW_FIX,
    FILE_LINE,
    FILE_ROW,
    LINE,
    ReadReport,
    each_file_once,
    file_format,
    find_column,
    read_table,
    release_arrow_memory,
)
from asp_cli.reading.nested import field_inside, with_nested_key
from asp_cli.reading.exported import refuse_exports_of_epochs, repeated_export_error
from asp_cli.reading.places import place_in_file, row_location

# --------------------------------------------------------------------------------------------------------
# Prompts




def _prompt_text(frame: pl.DataFrame, column: str,
                 path: Path) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series | None, pl.Series | None]:
    """(prompt text, number of messages, bad-row mask, too-deep mask or None, not-text-content mask or None) of a
    prompt column, one value per row.

    The too-deep mask marks rows whose JSON text nests deeper than asp reads (`asp_cli.limits`); the not-text mask
    rows with a chat message whose content is a number, true/false or an object. Both are bad rows too.
    """
    dtype = frame.schema[column]
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        fields = {f.name: f.dtype for f in dtype.inner.fields}
        if CHAT_CONTENT not in fields:
            raise InputError(
                f"{path}: column {column!r} is a list of objects without a 'content' field; "
                "give chat messages as [{\"role\": ..., \"content\": ...}]"
            )
        content_type = fields[CHAT_CONTENT]
        content = pl.element().struct.field(CHAT_CONTENT)
        parts = {f.name: f.dtype for f in content_type.inner.fields} if (
            isinstance(content_type, pl.List) and isinstance(content_type.inner, pl.Struct)) else {}
        if parts.get("text") in (pl.String, pl.Null):
            # Multi-part content (OpenAI style): a message's text is its text parts, joined. (A part's text that is
            # a number is no text: the branch below makes such rows bad, as `_parse_chat_json` does one row.)
            content = content.list.eval(pl.element().struct.field("text").cast(pl.String)).list.drop_nulls()
            content = content.list.join("\n")
        elif content_type == pl.List(pl.String):
            # Content as a list of strings: its strings, joined (they were dropped as parts without text).
            content = content.list.join("\n")
        elif content_type not in (pl.String, pl.Null):
            # Contents that are numbers, true/false or objects in every row: each row is bad, as one such content
            # among text is (`_parse_chat_json`), not the whole file.
            col = pl.col(column)
            out = frame.select(
                col.list.len().cast(pl.Int32).fill_null(0).alias("m"),
                col.list.eval(content.is_not_null()).list.any().fill_null(False).alias("n"),
            )
            return (pl.Series("t", [None] * frame.height, dtype=pl.String), out["m"],
                    pl.Series("b", [True] * frame.height, dtype=pl.Boolean), None, out["n"])
        col = pl.col(column)
        out = frame.select(
            col.list.eval(content.cast(pl.String)).list.join("\n").alias("t"),
            col.list.len().cast(pl.Int32).alias("m"),
            (col.is_null() | col.list.eval(pl.element().struct.field(CHAT_CONTENT).is_null()).list.any()).alias("b"),
        )
        return out["t"], out["m"], out["b"].fill_null(True), None, None
    if dtype == pl.String:
        col = pl.col(column)
        chat_like = col.str.strip_prefix("\x00json:").str.strip_chars_start().str.starts_with("[")
        # Chat lists as JSON text, or chat lists in a column of mixed kinds (the reader tags each non-text JSON
        # value): the chat rows are parsed, text stays text, and only the other rows are bad.
        if column.lower() == "messages" or frame.select(
            col.str.strip_chars_start().str.starts_with("[{").fill_null(False).all()
            | (col.str.starts_with("\x00json:") & chat_like).fill_null(False).any()
        ).item():
            return _chat_json_text(frame[column], chat_like_all=frame.select(chat_like.fill_null(False)).to_series())
        out = frame.select(untag(col).alias("t"), (col.is_null() | col.str.starts_with("\x00json:")).alias("b"))
        return out["t"], pl.Series("m", [1] * frame.height, dtype=pl.Int32), out["b"], None, None
    if isinstance(dtype, (pl.List, pl.Array)) and dtype.inner == pl.String:
        # The prompt itself as a list of text pieces: "name the prompt column" named the very column (a MindSpeed
        # newcomer's `problem`).
        raise InputError(f"{path}: column {column!r} holds lists of text ({dtype}), not one text per prompt; join "
                         "each list into one text (or make it a chat-message list), or name another column with "
                         "--prompt-key")
    raise InputError(
        f"{path}: column {column!r} holds {dtype}, not text or a chat-message list; "
        "name the prompt column with --prompt-key"
    )


_CHAT_DTYPE = pl.List(pl.Struct({"role": pl.String, CHAT_CONTENT: pl.String}))


# A message's "content" key followed by anything but a string: Polars' decoding into text would take 5 as "5", so
# such columns are parsed row by row (`_parse_chat_json`), where it is a bad row. The key of a real JSON object
# follows "{", "," or a blank; inside a string its quote would be escaped.
_CONTENT_NOT_TEXT = r'[{,\s]"content"\s*:\s*[^"\s]'


def _chat_json_text(values: pl.Series,
                    chat_like_all: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series, pl.Series]:
    """Chat lists stored as JSON text (e.g. the RollPacker files): parse them; plain text stays text.

    Text nested deeper than asp reads is checked before any parser sees it, and is a bad row.
    """
    stripped = values.str.strip_prefix("\x00json:")
    deep_rows = limits.too_deep_rows(stripped)
    deep = pl.Series("deep", [False] * values.len(), dtype=pl.Boolean)
    if deep_rows:
        deep = deep.scatter(deep_rows, True)
        values = values.clone().scatter(deep_rows, None)
        stripped = stripped.clone().scatter(deep_rows, None)
        chat_like_all = chat_like_all.clone().scatter(deep_rows, False)
    text, count, bad, not_text = _decode_chat_json(values, stripped, chat_like_all)
    return text, count, bad | deep, deep, not_text


def _decode_chat_json(values: pl.Series, stripped: pl.Series,
                      chat_like_all: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series]:
    try:
        if stripped.str.contains(_CONTENT_NOT_TEXT).fill_null(False).any():
            raise pl.exceptions.ComputeError("a content that is not text: row by row")
        decoded = stripped.str.json_decode(_CHAT_DTYPE)
        out = pl.DataFrame({"v": values, "d": decoded, "c": chat_like_all}).select(
            pl.when(pl.col("c"))
            .then(pl.col("d").list.eval(pl.element().struct.field(CHAT_CONTENT)).list.join("\n"))
            .otherwise(untag(pl.col("v")))
            .alias("t"),
            pl.when(pl.col("c")).then(pl.col("d").list.len().cast(pl.Int32)).otherwise(1).alias("m"),
            (
                pl.col("v").is_null()
                | (pl.col("v").str.starts_with("\x00json:") & ~pl.col("c"))
                | (pl.col("c") & pl.col("d").list.eval(pl.element().struct.field(CHAT_CONTENT).is_null()).list.any())
            ).alias("b"),
        )
        return out["t"], out["m"], out["b"].fill_null(True), pl.Series("n", [False] * values.len())
    except pl.exceptions.PolarsError:
        pass
    # Some row is not a well-formed chat list, or has a content that is not text: parse row by row to find which.
    texts: list[str | None] = []
    counts: list[int] = []
    bad: list[bool] = []
    not_text: list[bool] = []
    for raw in values.to_list():
        text, count, content_not_text = _parse_chat_json(raw)
        texts.append(text)
        counts.append(count)
        bad.append(text is None)
        not_text.append(content_not_text)
    return (pl.Series("t", texts, dtype=pl.String), pl.Series("m", counts, dtype=pl.Int32),
            pl.Series("b", bad, dtype=pl.Boolean), pl.Series("n", not_text, dtype=pl.Boolean))


def _parse_chat_json(raw: str | None) -> tuple[str | None, int, bool]:
    """(text, messages, whether a message's content is a number, true/false or an object) of one row."""
    if raw is None:
        return None, 0, False
    mixed = raw.startswith("\x00json:")
    body = raw[len("\x00json:"):] if mixed else raw
    if not body.lstrip().startswith("["):
        return (None, 0, False) if mixed else (untag_value(raw), 1, False)
    try:
        messages = json.loads(body)
    except json.JSONDecodeError:
        return (None, 0, False) if mixed else (raw, 1, False)
    messages = flatten_content_parts(messages)
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get(CHAT_CONTENT), str) for m in messages
    ):
        return None, 0, isinstance(messages, list) and any(
            isinstance(m, dict) and m.get(CHAT_CONTENT) is not None and not isinstance(m[CHAT_CONTENT], str)
            for m in messages)
    return "\n".join(m[CHAT_CONTENT] for m in messages), len(messages), False


def _choose_prompt_column(frame: pl.DataFrame, override: str | None, path: Path, flag: str = "--prompt-key") -> str:
    if override is not None:
        return find_column(frame, (), override, what="prompt", flag=flag, path=path)  # type: ignore[return-value]
    # A chat list under `prompt` (verl) wins; then `messages`; then the text columns in order.
    for name in frame.columns:
        if name.lower() == "prompt" and isinstance(frame.schema[name], pl.List):
            return name
    lowered = {c.lower(): c for c in frame.columns}
    if "messages" in lowered:
        return lowered["messages"]
    lengths = [lowered[k] for k in C.LENGTH_KEYS if k in lowered]
    if lengths and any(k in lowered for k in C.ID_KEYS) and not any(k in lowered for k in C.PROMPT_KEYS):  # a history given as the prompts (`asp schedule
        # train.parquet history.parquet`, --history forgotten) was told to name its prompt column with --prompt-key
        raise InputError(f"{path}: holds response lengths ({shown_id(lengths[0])}) but no prompt column (looked for "
                         f"{', '.join(C.PROMPT_KEYS)}): a rollout log or history, not prompts; give it with --history "
                         f"(asp schedule) or to asp observe, and the prompt file here (or name its column with {flag})")
    if {"input", "output", "score", "step"} <= lowered.keys():  # one of verl's rollout dumps, scheduled as prompts
        from asp_cli.reading.dump_folders import shell_path  # (its samples' texts) without a word (a hostile review)

        raise InputError(f"{path}: holds a verl rollout dump's columns (input, output, score, step): a run's outputs, "
                         "not prompts; give the prompt file(s) the run read (verl's data.train_files), and to feed the "
                         f"dump back as lengths: asp observe {shell_path(path)} --dataset PROMPTS -o history.parquet "
                         f"(prompts of such columns: name the prompt column with {flag})")
    return find_column(frame, C.PROMPT_KEYS, None, what="prompt", flag=flag, path=path)  # type: ignore[return-value]


def read_prompts(
    paths: Sequence[Path],
    options: ReadOptions = DEFAULT_READ,
) -> tuple[pl.DataFrame, ReadReport]:
    """Read one or more prompt files into one frame, inputs concatenated in the order given.

    ``options`` names the prompt and id columns (``prompt_key``, ``id_key``; found by name otherwise) and what to
    do with a malformed row (``on_bad_row``).

    Returns
    -------
    (frame, report)
        ``frame`` has columns ``row`` (int64, 0-based over all inputs), ``prompt_id`` (str), ``prompt_text``
        (str; a chat list joined by newlines), ``n_messages`` (int32), ``data_source`` (str or null),
        ``difficulty`` (float64 or null), ``source_file`` (str).

    Raises
    ------
    InputError
        Missing, empty or malformed files, a missing prompt column, a prompt that is not text or a chat
        list, duplicate ids.
    """
    # A file named twice, with an id column or without (whose ids are row numbers, so that its prompts were read
    # twice in silence: a hostile-input round), before anything is read.
    each_file_once(paths, "prompt file")
    refuse_exports_of_epochs(paths)  # an export of several epochs without ids read: nothing repeats
    report = ReadReport()
    parts: list[pl.DataFrame] = []
    offset = 0
    for path in paths:
        path = Path(path)
        fmt, _ = file_format(path)
        frame = read_table(path, on_bad_row=options.on_bad_row, report=report, text_columns=options.text_keys)
        part = extract_prompts(frame, path, fmt, options.prompt_key, options.id_key, options.on_bad_row, report,
                               offset, id_flag=options.id_flag, prompt_flag=options.prompt_flag,
                               source_key=options.source_key, difficulty_key=options.difficulty_key)
        offset += frame.height
        parts.append(part)
        del frame
        release_arrow_memory()
    if not parts:
        raise InputError("no input files given; name at least one prompt file")
    frame = pl.concat(parts, how="vertical")
    if frame.height == 0:
        raise InputError("no usable prompts left after skipping bad rows; fix the input files")
    _check_unique_ids(frame, named=options.id_key, row_numbered=[
        name for name, used in report.columns_used.items() if used.get("id") == "(row number)"],
        flag=options.id_flag)
    frame = frame.drop(FILE_ROW, FILE_LINE)
    report.settle()
    report.rows = frame.height
    return frame, report


def extract_prompts(
    frame: pl.DataFrame,
    path: Path,
    fmt: str,
    prompt_key: str | None,
    id_key: str | None,
    on_bad_row: OnBadRow,
    report: ReadReport,
    offset: int,
    *,
    file_row_offset: int = 0,
    locate_row: Callable[[int], str] | None = None,
    id_flag: str = "--id-key",
    prompt_flag: str = "--prompt-key",
    source_key: str | None = None,
    difficulty_key: str | None = None,
) -> pl.DataFrame:
    """The prompt frame (`read_prompts`' columns, plus the hidden row within the file) of one file's table.

    A block of a file (`asp_cli.reading.stream`) passes its first row within the file as ``file_row_offset``
    and ``locate_row``, which says where its ``index``-th row is in the file, for messages.
    """
    locate = locate_row or (lambda index: row_location(path, frame, index, fmt))
    frame = with_nested_key(frame, id_key, path)
    prompt_col = _choose_prompt_column(frame, prompt_key, path, prompt_flag)
    id_col = find_column(frame, C.ID_KEYS, id_key, what="id", flag=id_flag, path=path, required=False)
    frame, source_col = source_column(frame, path, source_key)
    frame, difficulty_col = difficulty_column(frame, path, difficulty_key)
    report.columns_used[str(path)] = {"prompt": prompt_col, "id": id_col or "(row number)",
                                      **({"source": source_col} if source_key else {}),
                                      **({"difficulty": difficulty_col} if difficulty_key else {})}
    report.metadata_columns[str(path)] = {"source": source_col, "difficulty": difficulty_col,
                                          **({"id_hint": hint} if id_col is None and (hint := _nested_id(frame))
                                             else {})}
    text, messages, bad, deep, not_text = _prompt_text(frame, prompt_col, path)
    row = (pl.int_range(0, pl.len(), dtype=pl.Int64) + offset).alias(C.ROW)
    if id_col is None:
        prompt_id, id_problem = row.cast(pl.String), pl.lit(None, pl.String)
    else:
        prompt_id, id_problem = id_column(frame, id_col)
    selected = frame.select(
        row,
        prompt_id.alias(C.PROMPT_ID),
        pl.lit(text).alias(C.PROMPT_TEXT),
        pl.lit(messages).alias(C.N_MESSAGES),
        _source_expr(frame, source_col).alias(C.DATA_SOURCE),
        _difficulty_expr(frame, difficulty_col).alias(C.DIFFICULTY),
        pl.lit(str(path)).alias("source_file"),
        (pl.int_range(0, pl.len(), dtype=pl.Int64) + file_row_offset).alias(FILE_ROW),
        (pl.col(LINE).cast(pl.Int64) if LINE in frame.columns else pl.lit(None, pl.Int64)).alias(FILE_LINE),
        (pl.lit(bad) | pl.lit(text).is_null()).alias("\x00bad"),
        id_problem.alias("\x00noid"),
    )
    difficulty = selected[C.DIFFICULTY]  # NaN and infinities are read as no difficulty, as before
    out_of_range = (difficulty.is_finite() & (difficulty.abs() > limits.MAX_DIFFICULTY)).fill_null(False)
    problems = selected.select(pl.col("\x00bad") | pl.col("\x00noid").is_not_null()).to_series() | out_of_range
    empty = selected.select(pl.col(C.PROMPT_TEXT).str.strip_chars() == "").to_series().fill_null(False) & ~problems
    if empty.any():
        report.empty(int(empty.sum()), [locate(int(i)) for i in empty.arg_true().head(5)])
    if problems.any():
        indices = problems.arg_true().to_list()
        if on_bad_row == "skip":
            for index in indices:
                report.skip(locate(index))
            selected = selected.filter(~problems)
        else:
            index = indices[0]
            where = locate(index)
            reason = selected["\x00noid"][index]
            if reason is not None:
                raise InputError(id_problem_message(where, str(id_col), reason))
            if out_of_range[index]:
                raise InputError(f"{where}: difficulty {selected[C.DIFFICULTY][index]:g} (column {difficulty_col!r}) is "
                                 f"beyond any level or rating (asp reads at most {limits.MAX_DIFFICULTY:g} in size); name "
                                 f"another column with --difficulty-key, or {BAD_ROW_FIX}")
            if deep is not None and deep[index]:
                raise InputError(f"{where}: column {prompt_col!r} holds JSON nested more than "
                                 f"{limits.MAX_NESTING_DEPTH} levels deep; asp reads at most {limits.MAX_NESTING_DEPTH} "
                                 f"levels: flatten it, or {BAD_ROW_FIX}")
            if not_text is not None and not_text[index]:
                raise InputError(f"{where}: column {prompt_col!r} holds a chat message whose 'content' is not text "
                                 f"(a number, true/false or an object); {BAD_ROW_FIX}")
            if _has_null_content(frame, prompt_col, index):
                raise InputError(f"{where}: column {prompt_col!r} holds a chat message whose 'content' is empty "
                                 f"(null); give every message its text; {BAD_ROW_FIX}")
            # The row names its prompt under another of the usual keys (a file mixing `question` and `prompt`
            # rows): said, where the message called the row's prompt missing only (a pipeline newcomer's round).
            other = next((c for c in frame.columns if c != prompt_col and c.lower() in C.PROMPT_KEYS
                          and frame[c][index] is not None), None) if frame[prompt_col][index] is None else None
            raise InputError(
                f"{where}: column {prompt_col!r} is not text or a chat-message list (or is missing)"
                + (f"; this row has {other!r} instead, as other rows have {prompt_col!r}: give every row one prompt "
                   "key" if other else "") + f"; {BAD_ROW_FIX}"
            )
    return selected.drop("\x00bad", "\x00noid")


def _has_null_content(frame: pl.DataFrame, column: str, index: int) -> bool:
    """Whether row ``index`` of a chat-list column (a list of objects: Parquet, or JSON lines read as such) holds a
    message whose content is null: said as that, where the generic message called the row no chat list."""
    dtype = frame.schema[column]
    if not (isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct)):
        return False
    messages = frame[column][index]
    return isinstance(messages, pl.Series) and any(
        isinstance(m, dict) and m.get(CHAT_CONTENT) is None for m in messages.to_list())


_JSON_TAG = JSON_TAG  # how `tables` keeps a non-text JSON value in a column of mixed kinds
BLANK_ID = "is blank (empty, or only spaces), which names no prompt reliably across files"


def id_column(frame: pl.DataFrame, column: str) -> tuple[pl.Expr, pl.Expr]:
    """The id of every row as text, and why a row's id is unusable (null when it is fine).

    Ids are text or integers (README, "Make a schedule"): integers within 64 bits (signed or unsigned) become
    their decimal text,
    and so does a number without a fraction (3.0, as pandas writes integers next to missing values) below
    2**53. Refused, each naming what the value is: a missing id, a blank one (empty, or only spaces: it names no
    prompt reliably across files, which trim or drop it), true/false, a JSON object or list, a number with a
    fraction, NaN, an infinity, an integer beyond 64 bits (write such ids as text).
    """
    dtype = frame.schema[column]
    col = pl.col(column)
    missing = pl.when(col.is_null()).then(pl.lit("is missing"))
    if dtype == pl.String:
        tagged = col.str.starts_with(_JSON_TAG)
        # A number without a fraction (3.0) in a column of mixed kinds is the integer it reads as, where a float
        # holds that integer exactly (as in a column of floats).
        body = untag(col)  # text as itself, a tagged value as its JSON text
        point_zero = tagged & body.str.contains(r"^-?[0-9]+\.0*$")
        inexact = point_zero & (body.cast(pl.Float64, strict=False).abs() >= _EXACT_FLOAT)
        body = pl.when(point_zero & ~inexact).then(body.str.replace(r"^(-?[0-9]+)\.0*$", "$1")).otherwise(body)
        integer = body.str.contains(r"^-?[0-9]+$")
        # Signed or unsigned 64 bits: a Parquet uint64 id (hash-based ids are common) is read as its text, so the
        # same id written as a JSON integer by asp export must be too (a hostile-input audit: it was refused).
        fits = body.cast(pl.Int64, strict=False).is_not_null() | body.cast(pl.UInt64, strict=False).is_not_null()
        problem = (
            missing
            .when(body.str.strip_chars() == "").then(pl.lit(BLANK_ID))
            .when(inexact).then(pl.lit("is the number ") + body.str.slice(0, 40)
                                + pl.lit(", too large to be an exact integer (write such ids as text)"))
            .when(tagged & integer & ~fits).then(pl.lit("is the integer ") + body.str.slice(0, 40)
                                                 + pl.lit(", too large for 64 bits (write such ids as text)"))
            .when(tagged & body.str.starts_with("{")).then(pl.lit("is a JSON object"))
            .when(tagged & body.str.starts_with("[")).then(pl.lit("is a list"))
            .when(tagged & body.is_in(["true", "false"])).then(pl.lit("is true or false, not an id"))
            .when(tagged & body.is_in(["NaN", "Infinity", "-Infinity"])).then(pl.lit("is ") + body + pl.lit(", not a number"))
            .when(tagged & ~integer).then(pl.lit("is the number ") + body + pl.lit(", not an integer"))
            .otherwise(pl.lit(None, pl.String))
        )
        return pl.when(problem.is_null()).then(body).otherwise(None), problem
    if dtype.is_integer():
        return col.cast(pl.String), missing.otherwise(pl.lit(None, pl.String))
    if dtype.is_float():
        # From 2**53 on a float may be an integer rounded (2**53 + 1 read as 2**53): not an id to trust.
        whole = col.is_finite() & (col == col.floor()) & (col.abs() < _EXACT_FLOAT)
        problem = (
            missing
            .when(col.is_nan()).then(pl.lit("is NaN, not a number"))
            .when(col.is_infinite()).then(pl.lit("is infinite, not a number"))
            .when(col.abs() >= _EXACT_FLOAT).then(pl.lit("is the number ") + col.cast(pl.String)
                                                 + pl.lit(", too large to be an exact integer (write such ids as text)"))
            .when(~whole).then(pl.lit("is the number ") + col.cast(pl.String) + pl.lit(", not an integer"))
            .otherwise(pl.lit(None, pl.String))
        )
        return pl.when(whole).then(col.cast(pl.Int64, strict=False).cast(pl.String)), problem
    kind = ("true or false, not an id" if dtype == pl.Boolean else "a JSON object" if isinstance(dtype, pl.Struct)
            else "a list" if isinstance(dtype, (pl.List, pl.Array)) else f"of type {dtype}, not text or an integer")
    return pl.lit(None, pl.String), missing.otherwise(pl.lit(f"is {kind}" if not kind.startswith("of") else kind))


def id_problem_message(where: str, column: str, reason: str, *, flag: str = "--id-key") -> str:
    """The message for a row whose id is unusable (``reason`` from `id_column`; ``flag`` names the id column)."""
    if reason == "is missing":
        return f"{where}: column {column!r} (the id) is missing; give every row an id, or {BAD_ROW_FIX}"
    if reason == BLANK_ID:
        return (f"{where}: column {column!r} (the id) {reason}; give the row an id, name another column with {flag}, "
                "or pass --on-bad-row skip to skip bad rows")
    return (f"{where}: column {column!r} (the id) {reason}; ids are text or integers: fix the row, name another "
            f"column with {flag}, or pass --on-bad-row skip to skip bad rows")


# Where a dataset keeps its source inside an object instead of beside the prompt (slime's and OpenRLHF's
# `metadata`, verl's `extra_info`): `source_column`'s fallback.
NESTED_SOURCE_KEYS: tuple[str, ...] = tuple(f"{obj}.{key}" for obj in ("metadata", "extra_info")
                                            for key in ("data_source", "source", "datasource", "dataset"))


# Where datasets keep an id inside an object: slime's --metadata-key dict, verl's extra_info.
NESTED_ID_KEYS: tuple[str, ...] = tuple(f"{obj}.{key}" for obj in ("metadata", "extra_info")
                                        for key in C.ID_KEYS)


def _nested_id(frame: pl.DataFrame) -> str | None:
    """The first of `NESTED_ID_KEYS` the rows' objects hold, for the message of a file read without an id column: a
    slime newcomer's `metadata.id` went unused while `metadata.source` was found, and a history keyed by it matched
    nothing. Not read as the id (verl's extra_info.index repeats across the sources of a joined file), and named
    only where it would serve as one here: text or whole numbers, none missing, none repeated (in this block)."""
    for key in NESTED_ID_KEYS:
        head, name = key.split(".")
        dtype = frame.schema.get(head)
        if not isinstance(dtype, pl.Struct) or name not in {f.name for f in dtype.fields}:
            continue
        values = frame[head].struct.field(name)
        if (values.dtype == pl.String or values.dtype.is_integer()) and not values.null_count() \
                and values.n_unique() == len(values):
            return key
    return None


def source_column(frame: pl.DataFrame, path: Path, key: str | None = None) -> tuple[pl.DataFrame, str | None]:
    """``frame`` and its data source column: ``key`` where named (``--source-key``; a dotted path into an object),
    else a top-level one (`columns.SOURCE_KEYS`), else the first of `NESTED_SOURCE_KEYS` the rows hold (added as a
    column of that dotted name), else None. A slime newcomer's `metadata.data_source` was missed: "the prompts carry
    no data_source", one global history correction; a source under another name (``task``) could not be named.

    Raises
    ------
    InputError
        ``key`` names no column of ``frame``.
    """
    if key is not None:
        return _named_column(frame, path, key, "--source-key", boolean=True)
    found = find_column(frame, C.SOURCE_KEYS, None, what="source", flag="", path=path, required=False)
    if found is not None:
        return frame, found
    for key in NESTED_SOURCE_KEYS:  # a column of that very name is read as it was (not refused: no one named it)
        nested = frame if key in frame.columns else with_nested_key(frame, key, path)
        if key in nested.columns:
            return nested, key
    return frame, None


def difficulty_column(frame: pl.DataFrame, path: Path, key: str | None = None) -> tuple[pl.DataFrame, str | None]:
    """``frame`` and its difficulty column: ``key`` where named (``--difficulty-key``; a dotted path into an object),
    else the first of `columns.DIFFICULTY_KEYS`, else None. A difficulty under another name (a team's `rating`)
    could not be named (a MindSpeed newcomer's round).

    Raises
    ------
    InputError
        ``key`` names no column of ``frame``, or one of objects or lists.
    """
    if key is None:
        return frame, find_column(frame, C.DIFFICULTY_KEYS, None, what="difficulty", flag="", path=path,
                                  required=False)
    return _named_column(frame, path, key, "--difficulty-key", boolean=False)


def _named_column(frame: pl.DataFrame, path: Path, key: str, flag: str, *,
                  boolean: bool) -> tuple[pl.DataFrame, str]:
    """``frame`` (with ``key``'s nested field as a column) and ``key``: a metadata column the user named with
    ``flag``, which must exist and hold scalars (text, numbers, and booleans where ``boolean``). An object or a list
    so named was read as no value at all, without a word; one file of several without it was not told what to do.
    """
    frame = with_nested_key(frame, key, path)
    try:
        find_column(frame, (), key, what="", flag=flag, path=path)
    except InputError as exc:
        raise InputError(f"{exc}{field_inside(frame, key, flag)}; name a column every input holds") from None
    dtype = frame.schema[key]
    if not boolean and dtype == pl.String:
        # Text with no number in it anywhere names no level: read as no difficulty at all, in silence (an agent
        # newcomer's --difficulty-key agent_name), where the user meant each value corrected apart.
        values = frame[key].drop_nulls()
        if values.len() and not values.str.contains(r"\d").any():
            raise InputError(f"{path}: column {key!r} (from {flag}) holds text without a number (e.g. "
                             f"{shown_id(values[0])}), from which no difficulty level can be read (a number, or text "
                             "holding one, as 'Level 5'); to correct each of its values apart, make it the data "
                             f"source (--source-key {key})")
    if dtype == pl.String or dtype.is_numeric() or dtype == pl.Null or (boolean and dtype == pl.Boolean):
        return frame, key
    if not boolean:  # a difficulty
        raise InputError(f"{path}: column {key!r} (from {flag}) holds {dtype}, not a number (or text holding one, "
                         "as 'Level 5'); name another column")
    fields = ", ".join(f"{key}.{f.name}" for f in dtype.fields[:3]) + (
        ", ..." if len(dtype.fields) > 3 else "") if isinstance(dtype, pl.Struct) and dtype.fields else ""
    raise InputError(f"{path}: column {key!r} (from {flag}) holds "
                     + (f"objects, not a name; name a field inside them ({fields})" if fields else
                        "lists or objects, not a name; name a column of text"))


def _source_expr(frame: pl.DataFrame, column: str | None) -> pl.Expr:
    if column is None:
        return pl.lit(None, dtype=pl.String)
    dtype = frame.schema[column]
    if dtype == pl.String:
        # As the file holds it: a number among text is its JSON text ("5", as a column of numbers gives it), not
        # the reader's tag (which reached the summaries and the per-source calibration as "\x00json:5"). An object
        # or a list among them names no source (it became one named `{"x": 1}`: a hostile-input audit).
        col = pl.col(column)
        structured = col.str.starts_with(JSON_TAG + "{") | col.str.starts_with(JSON_TAG + "[")
        return pl.when(structured).then(pl.lit(None, pl.String)).otherwise(untag(col))
    if dtype.is_numeric() or dtype == pl.Boolean:
        return pl.col(column).cast(pl.String)
    return pl.lit(None, dtype=pl.String)


def _difficulty_expr(frame: pl.DataFrame, column: str | None) -> pl.Expr:
    if column is None:
        return pl.lit(None, dtype=pl.Float64)
    dtype = frame.schema[column]
    if dtype.is_numeric():
        return pl.col(column).cast(pl.Float64)
    if dtype == pl.String:
        # "Level 5" (MATH) or "6.5" (DeepMath): take the first number.
        return pl.col(column).str.extract(r"(-?\d+(?:\.\d+)?)", 1).cast(pl.Float64, strict=False)
    return pl.lit(None, dtype=pl.Float64)


def _check_unique_ids(frame: pl.DataFrame, named: str | None = None, row_numbered: Sequence[str] = (),
                      flag: str = "--id-key") -> None:
    """Refuse repeated prompt ids (`duplicate_id_error`); ``row_numbered``: the files read without an id column,
    whose ids are row numbers, named in the message where one of them repeats another file's id (a pipeline
    newcomer was told to pass --id-key, which that file has none to give)."""
    duplicated = frame.filter(pl.col(C.PROMPT_ID).is_duplicated())
    if duplicated.height:
        first = duplicated[C.PROMPT_ID][0]
        rows = duplicated.filter(pl.col(C.PROMPT_ID) == first)
        files = set(rows["source_file"].to_list()) if "source_file" in rows.columns else set()
        unnamed = sorted(f for f in files if f in row_numbered)
        if files:  # an export of several epochs (or beside its dataset): --id-key cannot help
            exported = repeated_export_error(dict(rows["source_file"].value_counts().iter_rows()))
            if exported is not None:
                raise exported
        # Each file's own place (the global row of a second file's first row is not where it is): a JSON line's
        # line, blank lines and skipped bad lines counted (they were once not), else the row counted from 1.
        shown = rows.head(_PLACES_SHOWN)
        lines: dict = {}
        places = ", ".join(place_in_file(f, r, n, lines) for f, r, n in
                           zip(shown["source_file"], shown[FILE_ROW], shown[FILE_LINE], strict=True))
        if rows.height > _PLACES_SHOWN:
            places += f" and {rows.height - _PLACES_SHOWN:,} more"
        if unnamed and len(files) > 1:
            raise InputError(f"duplicate prompt id {shown_id(first)} ({places}): {Path(unnamed[0]).name} has no id "
                             "column, so its ids are row numbers, and another file's ids repeat them; give it an id "
                             "column (or read every file without one, so that rows are numbered over all of them)")
        raise duplicate_id_error(first, places, duplicated[C.PROMPT_ID].n_unique(), named, flag)


_PLACES_SHOWN = 3  # rows a duplicate-id message names: an id in 5,000 rows made a line of 25 KB
def duplicate_id_error(first: str, places: str, ids: int, named: str | None = None,
                       flag: str = "--id-key") -> InputError:
    """The one error for repeated prompt ids (E07), wherever the inputs are read; ``named``, the id column the user
    named (a newcomer named verl's extra_info.index, as the README says, on a file joining sources, each with its
    own index, and was told to pass --id-key); ``flag``, how the command names that column (asp observe:
    --dataset-id-key, whose newcomer was told to pass an --id-key that there names the logs' id column)."""
    flag = flag.split(",")[0]  # "--dataset-id-key, here the id column the schedule was made with"
    repeating = "1 id repeats" if ids == 1 else f"{ids:,} ids repeat"
    fix = (f"{flag} to use another column" if named is None else
           f"another {flag} than {named!r}, or leave {flag} out to read an id column of a common name "
           "(id, prompt_id, uid, ...) where there is one, else to number the rows (a file joining sources often repeats each source's own index)")
    return InputError(f"duplicate prompt id {shown_id(first)} ({places}); {repeating}. Make ids unique, or pass {fix}")
