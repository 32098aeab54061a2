"""verl's dataset layout: the five columns its ``RLHFDataset`` reads (``data_source``, ``prompt`` as a chat list,
``ability``, ``reward_model``, ``extra_info``), the user's values kept where present and defaults filled in
otherwise (`asp export --format verl`, `asp probe --format verl`)."""

from __future__ import annotations

import json

import polars as pl

from asp_cli import columns as C
from asp_cli import limits
from asp_cli.errors import InputError
from asp_cli.reading.json_records import JSON_TAG, kind_difference, untag, untag_value

# Where a reference answer may live, for verl's reward_model.ground_truth when the file has no reward_model.
ANSWER_KEYS = ("ground_truth", "answer", "solution", "label", "target", "gts")
_VERL_CHAT = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))


def to_verl(raw: pl.DataFrame, prompt_ids: pl.Series | None = None,
            where: str = "the dataset", prompt_column: str | None = None,
            source_column: str | None = None) -> tuple[pl.DataFrame, list[str]]:
    """Give a frame the five columns verl's RLHFDataset reads, keeping the user's values where present.

    ``prompt`` becomes a chat list (a chat list under ``prompt`` or ``messages`` is kept; text is wrapped as
    one user message); ``data_source`` defaults to ``"unknown"``; ``ability`` to ``"unknown"``;
    ``reward_model`` to ``{"style": "rule", "ground_truth": <answer column or null>}``; ``extra_info`` to
    ``{"index": <dataset row>, "prompt_id": <id>}``. ``prompt_ids`` (aligned with ``raw``'s rows) are the ids asp
    gave the prompts (the schedule's or the probe's: the column the user named, or the row number); a user's own
    ``extra_info`` without a ``prompt_id`` gains them. Without them the id is guessed from the usual id columns
    (an audit found that guess naming another column than the schedule's ``--id-key``, so logs fed back by
    ``extra_info.prompt_id`` matched the wrong prompts). ``where`` names the input files in errors: a
    ``reward_model`` or ``extra_info`` whose objects differ in kind from row to row is refused (`InputError`).
    ``prompt_column``: the prompt column the user named (``--prompt-key``) or the schedule was read with, which
    verl's ``prompt`` is made from (and then dropped, as ``messages`` is); without it, the columns above.
    ``source_column``: the data source column the user named (``--source-key``, a dotted path into an object), which
    fills ``data_source`` where the rows have none of their own (it was set to "unknown": a library user's round).

    Returns
    -------
    (frame, notes)
        The converted frame and warnings for people (defaults verl's reward routing depends on).
    """
    notes: list[str] = []
    _check_objects_kept(raw, where)
    lowered = {c.lower(): c for c in raw.columns}
    named = prompt_column if prompt_column in raw.columns else None
    out = raw.with_columns(_verl_prompt(raw, lowered, named).alias("prompt"))
    # The reader's tags (a non-text value in a column of mixed kinds) told chat rows from text; the rest is text.
    out = out.with_columns([untag(pl.col(c)) for c, t in out.schema.items() if t == pl.String])
    if "messages" in lowered and lowered["messages"] != "prompt" and named in (None, "prompt", lowered["messages"]):
        out = out.drop(lowered["messages"])
    elif named is not None and named != "prompt" and isinstance(raw.schema[named], pl.List):
        out = out.drop(named)  # a chat list now under `prompt`: not written twice

    source = next((lowered[k] for k in C.SOURCE_KEYS if k in lowered), None)
    if "data_source" not in out.columns or out.schema["data_source"] != pl.String:
        named_source = None
        if source_column is not None:
            from asp_cli.reading.nested import with_nested_key

            nested = with_nested_key(raw, source_column)
            if source_column in nested.columns and nested.schema[source_column] != pl.Null:
                named_source = untag(nested.get_column(source_column).cast(pl.String))
        value = (named_source.alias("data_source") if named_source is not None else
                 pl.col(source).cast(pl.String) if source else pl.lit(None, pl.String))
        out = out.with_columns(value.alias("data_source"))
    if (unsourced := out["data_source"].null_count()):
        notes.append(
            f"{unsourced:,} {'row has' if unsourced == 1 else 'rows have'} no data_source; set to 'unknown'. verl "
            "picks the reward function by data_source: set custom_reward_function.path, or add a data_source column"
        )
        out = out.with_columns(pl.col("data_source").fill_null("unknown"))

    if "ability" not in out.columns:
        out = out.with_columns(pl.lit("unknown").alias("ability"))
    else:
        out = out.with_columns(pl.col("ability").cast(pl.String).fill_null("unknown"))

    if "reward_model" not in out.columns or not isinstance(out.schema["reward_model"], pl.Struct):
        answer = next((lowered[k] for k in ANSWER_KEYS if k in lowered), None)
        truth = pl.col(answer).cast(pl.String) if answer and _castable(out, answer) else pl.lit(None, pl.String)
        if answer is None:
            notes.append(
                "no answer column (ground_truth, answer, solution, ...): reward_model.ground_truth is empty, "
                "which verl's rule-based rewards need"
            )
        if "reward_model" in out.columns:
            notes.extend(_replaced(out, "reward_model"))
            out = out.drop("reward_model")
        out = out.with_columns(pl.struct(pl.lit("rule").alias("style"), truth.alias("ground_truth")).alias("reward_model"))

    given = prompt_ids.cast(pl.String).alias("prompt_id") if prompt_ids is not None else None
    if "extra_info" not in out.columns or not isinstance(out.schema["extra_info"], pl.Struct):
        id_col = next((lowered[k] for k in C.ID_KEYS if k in lowered), None)
        prompt_id = (pl.lit(given) if given is not None else pl.col(id_col).cast(pl.String)
                     if id_col and _castable(out, id_col) else pl.lit(None, pl.String))
        if "extra_info" in out.columns:
            notes.extend(_replaced(out, "extra_info"))
            out = out.drop("extra_info")
        out = out.with_columns(
            pl.struct(pl.col("\x00row").alias("index"), prompt_id.alias("prompt_id")).alias("extra_info")
        )
    elif given is not None and "prompt_id" not in {f.name for f in out.schema["extra_info"].fields}:
        out = out.with_columns(pl.col("extra_info").struct.with_fields(pl.lit(given)))
    first = ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    return out.select([*first, *[c for c in out.columns if c not in first]]), notes


def _check_objects_kept(raw: pl.DataFrame, where: str) -> None:
    """Refuse a ``reward_model`` or ``extra_info`` of objects the reader kept as JSON text (they differ in kind
    somewhere: a ground truth that is text in one row and a number in another), naming where they differ.

    verl's layout needs an object column there, and filled in its default instead: every ground truth (and the
    ``extra_info`` verl's tools read) was dropped for a null, with a warning that the file had no answer column.
    """
    for name in ("reward_model", "extra_info"):
        if name not in raw.columns or raw.schema[name] != pl.String:
            continue
        if not raw.select(pl.col(name).str.starts_with(JSON_TAG + "{").any()).item():
            continue  # text only (no object to lose): the default stands in, as for a missing column
        values = [None if v is None else json.loads(v[len(JSON_TAG):]) if v.startswith(JSON_TAG) else untag_value(v)
                  for v in raw[name].to_list()]
        found = kind_difference(values)  # None where only the file's other rows differ (a probe's draw)
        place, one, other = found or ("", "", "")
        what = (f"holds objects whose field {place!r} is {one} in some rows and {other} in others" if place
                else f"is {one} in some rows and {other} in others" if found
                else "holds objects whose fields differ in kind from row to row in the file")
        which = "that field" if place else "it" if found else "each field"
        raise InputError(
            f"{where}: column {name!r} {what}, which verl's layout cannot keep (a Parquet column holds one type; "
            f"its values would be replaced by defaults); give {which} one kind in every row, or write --format "
            "jsonl, which keeps every row as it is"
        )


def _replaced(frame: pl.DataFrame, column: str) -> list[str]:
    """Said where a dataset's own ``column`` holds values that are no objects, which verl's layout replaces (a
    hostile-input round: "notadict" and [1, 2] became asp's defaults without a word)."""
    held = int(frame[column].is_not_null().sum())
    return [f"column {column!r} holds {held:,} values that are not objects ({frame.schema[column]}), which verl's "
            f"{column} must be: they are replaced by asp's defaults; make them objects to keep them"] if held else []


def _castable(frame: pl.DataFrame, column: str) -> bool:
    dtype = frame.schema[column]
    return dtype == pl.String or dtype.is_numeric() or dtype == pl.Boolean


def _verl_prompt(raw: pl.DataFrame, lowered: dict[str, str], named: str | None = None) -> pl.Expr:
    """A chat-list expression for verl's ``prompt`` column: from ``named`` (the prompt column the user named, or the
    schedule read) where given, else from a chat list under ``prompt`` or ``messages``, else from text."""
    if named is not None and named in raw.columns:
        chat = _chat_of(raw, named)
        if chat is not None:
            return chat
        if raw.schema[named] == pl.String:
            return _user_message(untag(pl.col(named)))
        raise InputError(f"cannot build verl's prompt column from column {named!r}: it is neither text nor a chat "
                         "list of role/content messages; name another with --prompt-key")
    for name in ("prompt", "messages"):
        column = lowered.get(name)
        chat = None if column is None else _chat_of(raw, column)
        if chat is not None:
            return chat
    for name in C.PROMPT_KEYS:
        column = lowered.get(name)
        if column is not None and raw.schema[column] == pl.String:
            return _user_message(untag(pl.col(column)))
    raise InputError(
        "cannot build verl's prompt column: no chat list under 'prompt'/'messages' and no text under "
        f"{', '.join(C.PROMPT_KEYS)}; name the prompt column with --prompt-key, or rename it"
    )


def _chat_of(raw: pl.DataFrame, column: str) -> pl.Expr | None:
    """``column`` as verl's chat list where it holds one (role/content messages, or their JSON text; text rows
    among JSON chat lists become one user message each), else None."""
    dtype = raw.schema[column]
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        fields = {f.name for f in dtype.inner.fields}
        if {"role", "content"} <= fields:
            return pl.col(column)
    if dtype == pl.String:
        text = untag(pl.col(column))
        looks_chat = raw.select(text.str.strip_chars_start().str.starts_with("[{").fill_null(False).all()).item()
        # A list among text prompts (the reader tags it: a column of mixed kinds) is a chat list; text stays
        # a user message (it was wrapped whole, the chat list's JSON text as a message's content).
        listed = pl.col(column).str.starts_with(JSON_TAG + "[").fill_null(False)
        if looks_chat or raw.select(listed.any()).item():
            chat = pl.lit(True) if looks_chat else listed
            decoded = _decoded_chats(raw, column, raw.select(pl.when(chat).then(text)).to_series())
            return pl.when(chat).then(pl.lit(decoded)).otherwise(_user_message(text))
    return None


def _user_message(text: pl.Expr) -> pl.Expr:
    """Text as a chat list of one user message."""
    return pl.concat_list(pl.struct(pl.lit("user").alias("role"), text.alias("content"))).cast(_VERL_CHAT)


def _decoded_chats(raw: pl.DataFrame, column: str, values: pl.Series) -> pl.Series:
    """Chat lists given as JSON text (null where a row holds none) as verl's chat-list type; `InputError` naming the
    first row that is no chat list of text messages (a message's content as a list of parts beside text ones,
    which one Parquet column cannot hold), or that nests deeper than asp reads."""
    def where(index: int) -> str:
        number = int(raw["\x00row"][index]) + 1 if "\x00row" in raw.columns else index + 1
        return f"dataset row {number}"

    deep = limits.too_deep_rows(values)
    if deep:
        raise InputError(
            f"{where(deep[0])}: column {column!r} holds JSON nested more than {limits.MAX_NESTING_DEPTH} levels deep; "
            f"asp reads at most {limits.MAX_NESTING_DEPTH} levels: flatten it"
        )
    try:
        return values.str.json_decode(_VERL_CHAT)
    except pl.exceptions.PolarsError:
        pass
    index = 0
    for index, value in enumerate(values.to_list()):
        try:
            pl.Series([value], dtype=pl.String).str.json_decode(_VERL_CHAT)
        except pl.exceptions.PolarsError:
            break
    raise InputError(
        f"{where(index)}: column {column!r} holds a chat list that verl's prompt column cannot hold (each message a "
        "role and a text content; here a content is a list of parts beside text contents, or not text); write "
        "every message's content as text, or export --format jsonl, which keeps each row as it is"
    )



def generation_server_note(prompts: pl.Series) -> str | None:
    """Where a probe's chat lists (``prompts``, verl's ``prompt`` column) hold different numbers of messages: verl
    0.9.1's ``main_generation_server`` makes one NumPy array of them (main_generation_server.py:159) and stops before
    any server starts (docs/probe.md). A verl newcomer's probe of a dataset where half the prompts carry a system
    message was written without a word; training reads such rows one by one and is not concerned."""
    if not isinstance(prompts.dtype, pl.List):
        return None
    counts = prompts.list.len().drop_nulls()
    if counts.len() < 2 or counts.min() == counts.max():
        return None
    fewest, most = int(counts.min()), int(counts.max())  # type: ignore[arg-type]
    return (f"the probe's chat lists hold {fewest} to {most} messages ({int((counts == fewest).sum())} of "
            f"{counts.len()} prompts hold {fewest}): verl 0.9.1's main_generation_server makes one NumPy array of "
            "them and stops with 'ValueError: setting an array element with a sequence. The requested array has an "
            "inhomogeneous shape' before any server starts (docs/probe.md); generate this probe with vLLM offline or "
            "examples/probe_openai.py (asp probe ... -o probe.jsonl), or give every prompt the same messages")
