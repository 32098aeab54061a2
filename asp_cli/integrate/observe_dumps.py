"""verl's text logs as `asp observe` reads them: which kind a log is (`log_format`), a rollout dump's input/output
text matched to the dataset's prompts and its outputs counted (`read_verl_dump`), and the generation output's
response texts counted (`read_verl_generations`); moved out of `asp_cli.integrate.observe`, which reads the other
logs and writes the history."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError
from asp_cli.integrate.dump_steps import cut_at_cap, dump_steps
from asp_cli.integrate.prompt_match import PromptMatcher, no_prompt_matched
from asp_cli.integrate.response_text import responses_column
from asp_cli.reading.options import ReadOptions

# verl's generation entry point (verl.trainer.main_generation_server, verl 0.9.1) writes the dataset's rows plus
# this column: the n response texts of each prompt.
VERL_RESPONSES = "responses"
# verl's rollout dumps (`_write_generations` of verl/trainer/ppo/ray_trainer.py and .../v1/trainer_base.py in
# 0.9.1; `gts` since 0.6): decoded prompt and response text per sample, the score and the global step.
_VERL_DUMP_COLUMNS = ("input", "output", "score", "step")
_VERL_TEXT_COLUMNS = ("input", "output")
# The v1 trainer's trajectory key, dumped as `uid`: {uuid4}_{session_id}_{output index} (agent_loop_tq.py).
_V1_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}_\d+_\d+$")
# Bytes per token when no tokenizer is given; the same rule predict/features.py uses for prompts.
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class Dataset:
    """The ``--dataset`` prompt files, read once: their prompts and what the read found."""

    paths: list[Path]
    prompts: pl.DataFrame
    report: Any  # reading.ReadReport
    on_bad_row: str


def log_format(path: Path, frame: pl.DataFrame, read: ReadOptions) -> str:
    """A verl dump by its columns (v1 when ``uid`` holds trajectory keys), verl's generation output, or a
    rollout log.

    A v1 dump's ``uid`` would otherwise pass for a prompt id, and a legacy dump's reward extras may hold an
    ``index``; the dump's own columns decide. A file with ``input``/``output`` text and no id column is read
    as a legacy dump too (what verl 0.5 wrote, without ``gts``). Generation output has an id, a list of
    response texts under ``responses`` and no length column.
    """
    from asp_cli.integrate.response_text import generation_ids
    from asp_cli.reading import find_column

    lowered = {c.lower(): c for c in frame.columns}
    id_col = read.length_id_key or find_column(
        frame, C.ID_KEYS, None, what="prompt id", flag="--id-key", path=path, required=False)
    has_id, has_length = id_col is not None, read.length_key is not None or find_column(
        frame, C.LENGTH_KEYS, None, what="response length", flag="--length-key", path=path, required=False) is not None
    uid = lowered.get("uid")
    v1_uids = False
    if uid is not None and frame.schema[uid] == pl.String:
        values = frame[uid].drop_nulls()
        v1_uids = bool(values.len() and values.str.contains(_V1_UID.pattern).all())
    # A detected id beside text that is not verl's whole dump is a log's own; one named (--id-key) of text with no
    # length column is read as a dump's ids, its lengths counted from the text (`dump_ids`).
    named_text = read.length_id_key is not None and not has_length
    if not set(_VERL_TEXT_COLUMNS) <= lowered.keys() or (not set(_VERL_DUMP_COLUMNS) <= lowered.keys() and has_id
                                                         and not named_text):
        if (has_id or generation_ids(frame) is not None) and not has_length and responses_column(frame) is not None:
            return "verl_generations"
        if has_id and not has_length and VERL_RESPONSES in lowered:  # not lists of texts: say which row (error)
            from asp_cli.integrate.response_text import generation_lists

            if generation_lists(path, frame, lowered[VERL_RESPONSES], read.on_bad_row)[1]:
                return "verl_generations"  # --on-bad-row skip: those rows are skipped and counted
        return "rollout_log"
    # verl's own columns, uid (its group key) and a reward extra's index, are no dataset id unless named.
    exact_id = read.length_id_key is not None or (has_id and str(id_col).lower() not in ("uid", "index"))
    if exact_id and has_length and not (v1_uids and id_col == uid):
        # A dump that carries each sample's prompt id and token count (the layout docs/integrations.md shows):
        # those exact counts, not the text's estimate (a hostile-input round: read as text, lengths were
        # estimated and samples of shared text went to the first such prompt).
        return "rollout_log"
    return "verl_v1_dump" if v1_uids else "verl_legacy_dump"


def read_verl_dump(
    path: Path,
    frame: pl.DataFrame,
    dataset: Dataset | None,
    tokenizer: str | Path | None,
    summary: dict[str, Any],
    read_on_bad_row: str = "error",
    shared: set[tuple[str, ...]] | None = None,
    cap: int | None = None,
    id_key: str | None = None,
    id_flag: str = "--id-key",
    v1: bool = False,
) -> pl.DataFrame:
    """A verl generation dump: match each input's text to a dataset prompt (or, with ``id_key``, take each sample's
    id from that column of the dump: `dump_ids`), count the output's tokens (with the rollout's ``cap`` given, those
    at it cut and the others' end token given back: `dump_steps.cut_at_cap`); ``v1``: its ``uid`` holds the v1
    trainer's trajectory keys."""
    columns = {c.lower(): c for c in frame.columns}
    if id_key is not None:
        given, id_problems = dump_ids(path, frame, columns, id_key, id_flag, v1)
        summary["columns_used"][path.name] = {"id": id_key, "length": columns["output"]}
    elif dataset is None:
        raise InputError(
            f"{path}: input/output text without prompt ids (verl's rollout dump, OpenRLHF's or slime's length log); "
            "pass --dataset with the prompt file(s) the rollouts read, so asp can match inputs to prompts, or log "
            "prompt ids and token counts instead"
        )
    from asp_cli.integrate.response_text import count_responses, dump_texts

    texts, odd = dump_texts(path, frame, columns, read_on_bad_row)  # an output of 5 was counted as the text "5"
    inputs, outputs = texts["input"].to_list(), texts["output"].to_list()
    if id_key is not None:
        ids: list[str | None] = given
        odd = {**id_problems, **odd}
    else:
        matcher = PromptMatcher(prompt_contents(dataset))
        ids = [matcher.match(text) if text else None for text in inputs]
        summary["ambiguous_matches"] += sum(1 for text, i in zip(inputs, ids, strict=True)
                                            if i is not None and matcher.ambiguous(text))
        if shared is not None:
            shared.update(matcher.shared_ids())
    counts, whole = count_responses(path, columns["output"], outputs, tokenizer, BYTES_PER_TOKEN, summary)
    result = pl.DataFrame({"prompt_id": ids, "response_tokens": counts, "\x00whole": whole},
                          schema={"prompt_id": pl.String, "response_tokens": pl.Int64, "\x00whole": pl.Boolean})
    bad = result.select(pl.col("prompt_id").is_null() | pl.col("response_tokens").is_null()).to_series()
    summary.setdefault("\x00steps", []).append((path, dump_steps(frame, columns, ~bad, ids)))  # `dump_notes`
    if bad.any():
        from asp_cli.reading.places import row_location
        from asp_cli.reading.tables import BAD_ROW_FIX, file_format

        rows = bad.arg_true().to_list()
        # Its line in the file (lines skipped as not JSON take no row of the frame, so a row is not a line), and
        # why: an audit's dump row with no output was said to match no prompt.
        fmt = file_format(path)[0]
        examples = [f"{row_location(path, frame, i, fmt)}: " + (odd.get(i) or (
                    "its output is missing" if ids[i] is not None else "its input matches no dataset prompt"))
                    for i in rows[:5]]
        unmatched = [i for i in rows if ids[i] is None and not odd.get(i)]  # `prompt_match.no_prompt_matched`
        if read_on_bad_row == "error" and rows[0] in unmatched[:1]:  # the wrong --dataset, or edited prompts
            raise InputError(no_prompt_matched(examples[0], len(unmatched), len(ids), dataset.prompts.height,
                                               dataset.paths))
        if read_on_bad_row == "error":
            raise InputError(f"{examples[0]}; {BAD_ROW_FIX}")
        summary["bad_rows"] += len(rows)
        summary["bad_row_examples"].extend(examples)
        result = result.filter(~bad)
    # A response that holds a special token was decoded with them (OpenRLHF's reward function's): counted whole.
    summary["whole_lengths"] = summary.get("whole_lengths", 0) + int(result["\x00whole"].sum())
    if tokenizer is not None:
        summary.setdefault("\x00counted", []).append(result["response_tokens"])  # `dump_notes`: an unsaid cap
        if cap is not None:
            return cut_at_cap(result, cap, summary)
    summary["estimated_lengths" if tokenizer is None else "eos_short_lengths"] += int((~result["\x00whole"]).sum())
    return result.drop("\x00whole").with_columns(pl.lit(None, pl.Boolean).alias("truncated"),
                                                  pl.lit(None, pl.Int32).alias("epoch"))


def read_verl_generations(
    path: Path,
    frame: pl.DataFrame,
    responses: str,
    read: ReadOptions,
    summary: dict[str, Any],
) -> pl.DataFrame:
    """verl's ``main_generation_server`` output: the dataset's rows (with their id) plus ``responses``, the n
    response texts of each prompt. Each text is one sample, counted with the tokenizer or estimated."""
    from asp_cli.reading import find_column
    from asp_cli.reading.nested import with_nested_key
    from asp_cli.reading.prompts import id_column

    from asp_cli.integrate.response_text import ASP_ID_FIELD, count_responses, generation_ids, generation_lists

    asp_ids = generation_ids(frame) if read.length_id_key is None else None  # no id column: asp's copy of the id
    frame = with_nested_key(frame, read.length_id_key, path)  # a dotted --id-key (extra_info.index), as schedule's
    id_col = find_column(frame, C.ID_KEYS, read.length_id_key, what="prompt id", flag=read.length_id_flag, path=path,
                         required=asp_ids is None)
    summary["columns_used"][path.name] = {"id": id_col or ASP_ID_FIELD, "length": responses}  # `ids_of_log`
    ids = id_column(frame, id_col)[0] if id_col is not None else asp_ids  # an id neither text nor integer: left out

    lists, odd = generation_lists(path, frame, responses, read.on_bad_row)  # rows of no list of texts: skipped
    samples = frame.select(ids.alias("prompt_id"), pl.Series(responses, lists, dtype=pl.List(pl.String)),
                           pl.int_range(0, pl.len(), dtype=pl.Int64).alias("\x00row")).explode(responses)
    if odd:
        from asp_cli.reading.places import row_location
        from asp_cli.reading.tables import file_format

        summary["bad_rows"] += len(odd)
        summary["bad_row_examples"].extend(f"{row_location(path, frame, i, file_format(path)[0])}: {why}"
                                           for i, why in list(odd.items())[:5])
        samples = samples.filter(~pl.col("\x00row").is_in(list(odd)))
    texts = samples[responses].to_list()

    counts = count_responses(path, responses, texts, read.tokenizer, BYTES_PER_TOKEN, summary)[0]
    if read.tokenizer is None:
        summary["estimated_lengths"] += sum(1 for t in texts if t is not None)
    result = pl.DataFrame({"prompt_id": samples["prompt_id"], "response_tokens": counts},
                          schema={"prompt_id": pl.String, "response_tokens": pl.Int64})
    bad = result.select(pl.col("prompt_id").is_null() | pl.col("response_tokens").is_null()).to_series()
    if bad.any():
        from asp_cli.reading.places import row_location
        from asp_cli.reading.tables import BAD_ROW_FIX, file_format

        where = row_location(path, frame, int(samples["\x00row"][int(bad.arg_true()[0])]), file_format(path)[0])
        what = f"{int(bad.sum())} responses without an id or text (the first: {where})"
        if read.on_bad_row == "error":  # it skipped them with exit 0 whatever the option said
            raise InputError(f"{path}: {what}; {BAD_ROW_FIX}")
        summary["bad_rows"] += int(bad.sum())
        summary["bad_row_examples"].append(f"{path}: {what}")
        result = result.filter(~bad)
    return result.with_columns(pl.lit(None, pl.Boolean).alias("truncated"), pl.lit(None, pl.Int32).alias("epoch"))


def prompt_contents(dataset: Dataset) -> list[tuple[str, str]]:
    """(text of the last message, prompt id) per dataset prompt: what a chat template wraps last."""
    from asp_cli.reading import read_table

    prompts, report = dataset.prompts, dataset.report
    texts = prompts[C.PROMPT_TEXT].to_list()
    multi = prompts.filter(pl.col(C.N_MESSAGES) > 1)
    if multi.height:
        # A chat list is joined by newlines in prompt_text; take its last message from the file instead.
        last: dict[int, str] = {}
        offset = 0
        for path in dataset.paths:
            raw = read_table(path, on_bad_row=dataset.on_bad_row)  # type: ignore[arg-type]
            column = report.columns_used.get(str(path), {}).get("prompt")
            dtype = raw.schema.get(column) if column else None
            if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
                contents = raw[column].list.last().struct.field("content").cast(pl.String).to_list()
                last.update({offset + i: c for i, c in enumerate(contents) if c is not None})
            offset += raw.height
        rows = prompts[C.ROW].to_list()
        texts = [last.get(row, text) for row, text in zip(rows, texts, strict=True)]
    return [(text.strip(), prompt_id) for text, prompt_id in zip(texts, prompts[C.PROMPT_ID].to_list(), strict=True)]


def counts_text(kind: str, read: ReadOptions) -> bool:
    """Whether a log of this kind is read as response text to count (a verl dump named by columns is not)."""
    if kind == "verl_generations":
        return True
    return kind in ("verl_v1_dump", "verl_legacy_dump") and read.length_key is None


# What verl writes into every rollout dump, none of it a prompt id (`_write_generations`; the v1 trainer's `uid`
# holds trajectory keys, `_V1_UID`).
_VERL_OWN = {"input": "the prompt text", "output": "the response text", "gts": "the ground truth",
             "score": "the reward", "step": "the training step", "uid": "the v1 trainer's trajectory keys"}


def dump_ids(path: Path, frame: pl.DataFrame, columns: dict[str, str], key: str, flag: str,
             v1: bool) -> tuple[list[str | None], dict[int, str]]:
    """Each sample's prompt id from the dump's column ``key`` (``flag``, `asp observe --id-key`; a dotted key reads a
    field of an object column), and why a row's id is unusable (by row). Refused in one line: a column the dump
    lacks (the dataset's id, `--id-key extra_info.index`, was given as the log's) and one of verl's own."""
    from asp_cli.reading import find_column
    from asp_cli.reading.nested import with_nested_key
    from asp_cli.reading.prompts import id_column

    top = key.split(".")[0].lower()
    if top not in columns:  # verl's dump with the dataset's id (`--id-key extra_info.index`) was told "a prompt file"
        raise InputError(f"{path}: input/output text without a column {key.split('.')[0]!r}, which {flag} {key} "
                         "names (it names the log's id column); a rollout dump of text is matched to the --dataset's "
                         f"prompts: name their id column with --dataset-id-key {key}, and drop {flag}")
    if top in _VERL_OWN and (top != "uid" or v1):  # read as a log, it was told "a prompt file (the probe's?)"
        raise InputError(f"{path}: {flag} {key} names {columns[top]!r}, {_VERL_OWN[top]} verl writes into every "
                         f"rollout dump, not a prompt id; drop {flag}: a dump of text is matched to the --dataset's "
                         "prompts (their id column: --dataset-id-key)")
    keyed = with_nested_key(frame, key, path)
    column = find_column(keyed, C.ID_KEYS, key, what="prompt id", flag=flag, path=path)
    value, problem = id_column(keyed, column)
    read = keyed.select(value.alias("id"), problem.alias("problem"))
    why = {i: f"column {column!r} (the id) {said}" for i, said in enumerate(read["problem"].to_list()) if said}
    return [None if i in why else v for i, v in enumerate(read["id"].to_list())], why
