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


def first_not_text(column: Any, *, lists: bool = False) -> tuple[int, str] | None:
    """The first row of a dump's text ``column`` (a Polars Series as `asp_cli.reading.read_table` gives it) whose value
    is not text, and what it holds (``lists``: a list of texts each, verl's generation ``responses``), or None. In a
    column of mixed kinds the reader tags the other values (`json_records.JSON_TAG`): an output of 5 was counted as
    the text "5", and a list of responses holding a number made the file read as a prompt file (a hostile-input
    round)."""
    import json

    import polars as pl

    from asp_cli.reading.json_records import JSON_TAG, TEXT_TAG

    dtype = column.dtype
    if dtype == pl.Null or (lists and dtype == pl.List(pl.String)):
        return None
    for i, value in enumerate(column.to_list()):
        if value is None:
            continue
        if dtype != pl.String:  # a column of numbers or true/false, or lists of them
            held = value if not lists else next((v for v in value if v is not None), None)
            if held is not None:
                return i, json.dumps(held)[:60]
            continue
        if not lists:
            if value.startswith(JSON_TAG):
                return i, value[len(JSON_TAG):][:60]
            continue
        if not value.startswith(JSON_TAG) or value.startswith(TEXT_TAG):
            return i, f"the text {value.removeprefix(TEXT_TAG)[:40]!r}"
        parsed = json.loads(value[len(JSON_TAG):])
        if not isinstance(parsed, list):
            return i, json.dumps(parsed)[:60]
        odd = next((v for v in parsed if not isinstance(v, str) and v is not None), None)
        if odd is not None:
            return i, json.dumps(odd)[:60]
    return None
