"""The responses of a text dump (verl's rollout dumps and generation output) counted in tokens, for `asp observe`.

A dump gives no token counts, only the text: what cannot be counted is refused (every response empty: nothing to
count), and a tokenizer that cannot split the text (every response of several words one token) is said, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asp_cli.errors import InputError

# A tokenizer that counts this share of the responses of several words as one token each cannot split text: a
# `tokenizers` WordLevel model without a pre-tokenizer reads a whole response as one unknown word (a hostile-input
# round: every length 1, exit 0). A real one gives two words at least two tokens, save a rare merged pair.
_ONE_TOKEN_SHARE = 0.9


def count_responses(path: Path, column: str, texts: list[str | None], tokenizer: str | Path | None,
                    bytes_per_token: float, summary: dict[str, Any]) -> tuple[list[int | None], list[bool]]:
    """Each response's token count and whether it holds a special token (`features.count_text_tokens`), after
    refusing a dump whose every response is empty; a tokenizer that cannot split the text goes into
    ``summary["read_notes"]`` (said with `asp observe`'s warnings).

    Raises
    ------
    InputError
        Every response of ``path`` is empty or blank, or counts 0 tokens.
    """
    from asp_cli.predict.features import count_text_tokens

    present = [t for t in texts if t is not None]
    # As a length file whose every length is 0 is refused (E82): the wrong column, or a rollout that wrote nothing.
    # Without a tokenizer each empty text was estimated at 1 token, with one at 0, which `--history` then refused.
    if present and not any(t.strip() for t in present):
        raise InputError(f"{path}: every one of the {len(present):,} responses (column {column!r}) is empty: the "
                         "wrong column, or a rollout that wrote nothing; give the log of a rollout whose responses "
                         "hold text")
    counts, whole = count_text_tokens(texts, tokenizer, bytes_per_token)
    if tokenizer is None or not present:
        return counts, whole
    if not any(c for c in counts if c is not None):
        raise InputError(f"{path}: --tokenizer {tokenizer} counts every one of the {len(present):,} responses (column "
                         f"{column!r}) as 0 tokens; give the tokenizer.json of the model that generated them")
    several = [c for t, c in zip(texts, counts, strict=True) if t is not None and len(t.split(None, 1)) > 1]
    single = sum(1 for c in several if c is not None and c <= 1)
    if several and single >= _ONE_TOKEN_SHARE * len(several):
        summary.setdefault("read_notes", []).append(
            f"{path}: --tokenizer {tokenizer} counts {single:,} of its {len(several):,} responses of several words as "
            "one token each: it cannot split the text (a tokenizer without a pre-tokenizer?), so these lengths are "
            "wrong; give the tokenizer.json of the model that generated them")
    return counts, whole


def dump_texts(path: Path, frame: Any, columns: dict[str, str], on_bad_row: str) -> tuple[Any, dict[int, str]]:
    """A verl dump's ``input`` and ``output`` as text (``columns``: each one's name in ``frame``), and the rows whose
    either holds something else, with what (null in the texts: skipped and counted with ``on_bad_row="skip"``, as
    the other bad rows are; before, they stopped the run whatever the option said).

    Raises
    ------
    InputError
        With ``on_bad_row="error"``, the first such row, or a column of lists or objects.
    """
    import polars as pl

    from asp_cli.reading.json_records import untag

    odd: dict[int, str] = {}
    whole = {}
    for c in ("input", "output"):
        column = columns[c]
        whole[c] = frame.schema[column].is_nested() or frame.schema[column] == pl.Binary
        if whole[c] and on_bad_row == "error":  # a list or an object could not be cast to text: exit 70
            raise InputError(f"{path}: column {column!r} holds {frame.schema[column]}, not text: a verl dump's input "
                             "and output are the prompt's and the response's text, one each a row")
        found = not_text_rows(frame[column])
        if found and on_bad_row == "error":
            held = f"text (a verl dump's {column} is the {'prompt' if c == 'input' else 'response'}'s text)"
            raise InputError(_not_held(path, frame, found[0], column, held))
        for i, value in found:
            odd.setdefault(i, f"column {column!r} holds {value}, not text")
    skipped = pl.Series("\x00odd", [i in odd for i in range(frame.height)], dtype=pl.Boolean)
    # As the file holds each value, as the other readers give them (`json_records.untag`): in a column of mixed kinds
    # (an output that is a number among texts) the reader tags the other values, and escapes text that starts as a
    # tag does; the tags were counted as the output's tokens.
    texts = frame.select(columns["input"], columns["output"]).with_columns(skipped).select(
        (pl.lit(None, pl.String) if whole[c] else
         pl.when(pl.col("\x00odd")).then(None).otherwise(untag(pl.col(columns[c]).cast(pl.String)))).alias(c)
        for c in ("input", "output"))
    return texts, odd


ASP_ID_FIELD = "extra_info.prompt_id"  # where asp's verl layout (`asp probe`, `asp export --format verl`) keeps the id


def generation_ids(frame: Any) -> Any | None:
    """The ids of verl's generation output whose rows have no id column of their own, or None: asp's copy of each
    row's id in ``extra_info.prompt_id`` (`ASP_ID_FIELD`), which `asp probe --format verl` writes whatever
    ``--id-key`` it read (a verl newcomer's probe made with ``--id-key extra_info.index``, as docs/probe.md says,
    was refused as "a prompt file ... generate its responses first", and ``--id-key extra_info.index`` as a field
    inside a column: no way to observe it)."""
    import polars as pl

    column = next((c for c in frame.columns if c.lower() == "extra_info"), None)
    dtype = frame.schema[column] if column is not None else None
    if not isinstance(dtype, pl.Struct) or "prompt_id" not in [f.name for f in dtype.fields]:
        return None
    return frame[column].struct.field("prompt_id").cast(pl.String).alias(ASP_ID_FIELD)


def responses_column(frame: Any) -> str | None:
    """The ``responses`` column of verl's generation output (a list of response texts per prompt), if any."""
    import polars as pl

    for column in frame.columns:
        dtype = frame.schema[column]
        if column.lower() == "responses" and isinstance(dtype, pl.List) and dtype.inner == pl.String:
            return column
    return None


def generation_lists(path: Path, frame: Any, column: str,
                     on_bad_row: str) -> tuple[list[list[str | None] | None], dict[int, str]]:
    """verl's generation output's ``responses`` (``column``): each row's list of response texts, and the rows that
    hold something else, with what (None in the lists: skipped and counted with ``on_bad_row="skip"``).

    Raises
    ------
    InputError
        With ``on_bad_row="error"``, the first such row.
    """
    lists, found = response_lists(frame[column])
    if found and on_bad_row == "error":
        raise InputError(_not_held(path, frame, found[0], column,
                                   "a list of response texts (verl's generation output: one text per response)"))
    return lists, {i: f"column {column!r} holds {value}, not a list of response texts" for i, value in found}


def _not_held(path: Path, frame: Any, found: tuple[int, str], column: str, wanted: str) -> str:
    """The refusal of a dump row whose ``column`` holds ``found``, not what it should (``wanted``)."""
    from asp_cli.reading.places import row_location
    from asp_cli.reading.tables import BAD_ROW_FIX, file_format

    where = row_location(path, frame, found[0], file_format(path)[0])
    return f"{where}: column {column!r} holds {found[1]}, not {wanted}; {BAD_ROW_FIX}"


def not_text_rows(column: Any) -> list[tuple[int, str]]:
    """Every row of a dump's text ``column`` (a Polars Series as `asp_cli.reading.read_table` gives it) whose value
    is not text, and what it holds. In a column of mixed kinds the reader tags the other values
    (`json_records.JSON_TAG`): an output of 5 was counted as the text "5" (a hostile-input round)."""
    import polars as pl

    from asp_cli.reading.json_records import JSON_TAG

    dtype = column.dtype
    if dtype == pl.Null:
        return []
    found = []
    for i, value in enumerate(column.to_list()):
        if value is None:
            continue
        if dtype != pl.String:  # a column of numbers, true/false, lists or objects
            found.append((i, _shown(value)))
        elif value.startswith(JSON_TAG):
            found.append((i, value[len(JSON_TAG):][:60]))
    return found


def response_lists(column: Any) -> tuple[list[list[str | None] | None], list[tuple[int, str]]]:
    """verl's generation ``responses`` (a Polars Series): each row's list of response texts (None where it holds
    none, or holds something else), and every row that holds something else with what it holds. A list of responses
    holding a number made the file read as a prompt file, and a number instead of a list was exit 70 (hostile-input
    rounds)."""
    import json

    import polars as pl

    from asp_cli.reading.json_records import JSON_TAG, TEXT_TAG

    dtype = column.dtype
    values = column.to_list()
    if dtype == pl.Null or dtype == pl.List(pl.String):
        return values, []
    lists: list[list[str | None] | None] = []
    found = []
    for i, value in enumerate(values):
        if value is not None and dtype == pl.String:  # a column of mixed kinds: each value as the file holds it
            if not value.startswith(JSON_TAG) or value.startswith(TEXT_TAG):
                found.append((i, f"the text {value.removeprefix(TEXT_TAG)[:40]!r}"))
                lists.append(None)
                continue
            value = json.loads(value[len(JSON_TAG):])
        if value is None:
            lists.append(None)
            continue
        odd = (value if not isinstance(value, list)
               else next((v for v in value if not isinstance(v, str) and v is not None), None))
        if odd is not None:
            found.append((i, _shown(odd)))
        lists.append(None if odd is not None else value)
    return lists, found


def _shown(value: Any) -> str:
    """A value that is not text as a message names it: as JSON, cut short."""
    import json

    return "bytes" if isinstance(value, bytes) else json.dumps(value, default=str)[:60]
