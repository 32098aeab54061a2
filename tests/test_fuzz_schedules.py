"""Fuzzing the schedule consumers: a damaged or hand-edited schedule gives a result or a clean AspError.

A schedule is a public file that people edit, filter and rewrite with their own tools; `asp report`,
`asp simulate`, `asp export` and the replay API must never crash on one.
"""

from dataclasses import replace
import json
import os

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from asp_cli.errors import AspError
from asp_cli.integrate.export import export
from asp_cli.arrange.pipeline import schedule
from asp_cli.integrate.replay import open_schedule
from asp_cli.report.facts import build_report
from asp_cli.schedule_format import METADATA_KEY, read_schedule
from asp_cli.settings import ScheduleSettings
from asp_cli.bench.simulate import SIMULATE_READ, simulate_file

from util import make_prompts, write_jsonl

COLUMNS = ["seq", "instance", "minibatch", "epoch", "row", "prompt_id", "predicted_tokens", "train_step",
           "expected_start_s", "expected_finish_s", "expected_lag"]
SETTINGS_KEYS = ["instances", "samples_per_prompt", "train_batch_size", "max_response_tokens", "epochs", "max_lag",
                 "preset", "seed", "minibatch_size"]
odd_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=6),
                       st.lists(st.integers(), max_size=2))

column_edits = st.one_of(
    st.tuples(st.just("drop"), st.sampled_from(COLUMNS)),
    st.tuples(st.just("to_string"), st.sampled_from(COLUMNS)),
    st.tuples(st.just("to_float"), st.sampled_from(COLUMNS)),
    st.tuples(st.just("null_one"), st.sampled_from(COLUMNS)),
    st.tuples(st.just("value"), st.sampled_from(COLUMNS), st.integers(-(2**40), 2**40)),
    st.tuples(st.just("keep_rows"), st.integers(0, 60)),
    st.tuples(st.just("duplicate_row"), st.integers(0, 59)),
    st.tuples(st.just("reverse"),),
)
metadata_edits = st.one_of(
    st.tuples(st.just("setting"), st.sampled_from(SETTINGS_KEYS), odd_values),
    st.tuples(st.just("drop_setting"), st.sampled_from(SETTINGS_KEYS)),
    st.tuples(st.just("no_metadata"),),
    st.tuples(st.just("garbage_metadata"), st.text(max_size=10)),
)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("made")
    prompts = write_jsonl(folder / "prompts.jsonl", make_prompts(60))
    out = folder / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=3, samples_per_prompt=2, train_batch_size=8,
                                                       minibatch_size=6))
    lengths = write_jsonl(folder / "lengths.jsonl",
                          [{"id": r["id"], "response_tokens": 100 + 7 * i} for i, r in enumerate(make_prompts(60))])
    return {"prompts": prompts, "schedule": out, "lengths": lengths}


def _edited(table: pa.Table, edits) -> pa.Table:
    frame = pl.from_arrow(table)
    for edit in edits:
        kind = edit[0]
        if kind == "keep_rows":
            frame = frame.head(edit[1])
            continue
        if kind == "duplicate_row":
            frame = pl.concat([frame, frame.slice(min(edit[1], max(frame.height - 1, 0)), 1)])
            continue
        if kind == "reverse":
            frame = frame.reverse()
            continue
        column = edit[1]
        if column not in frame.columns:
            continue
        if kind == "drop":
            frame = frame.drop(column)
        elif kind == "to_string":
            frame = frame.with_columns(pl.col(column).cast(pl.String))
        elif kind == "to_float":
            frame = frame.with_columns(pl.col(column).cast(pl.Float64, strict=False))
        elif kind == "null_one" and frame.height:
            frame = frame.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col(column))
                                       .alias(column))
        elif kind == "value" and frame.height:
            value = edit[2] if frame.schema[column].is_numeric() else str(edit[2])
            frame = frame.with_columns(pl.when(pl.int_range(pl.len()) == frame.height // 2).then(pl.lit(value))
                                       .otherwise(pl.col(column)).alias(column))
    return frame.to_arrow().replace_schema_metadata(table.schema.metadata)


def _with_metadata(table: pa.Table, edits) -> pa.Table:
    raw = dict(table.schema.metadata or {})
    for edit in edits:
        if edit[0] == "no_metadata":
            raw.pop(METADATA_KEY, None)
            continue
        if edit[0] == "garbage_metadata":
            raw[METADATA_KEY] = edit[1].encode()
            continue
        try:
            meta = json.loads(raw[METADATA_KEY])
        except (KeyError, ValueError):
            continue
        if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict):
            continue
        if edit[0] == "setting":
            meta["settings"][edit[1]] = edit[2]
        else:
            meta["settings"].pop(edit[1], None)
        raw[METADATA_KEY] = json.dumps(meta).encode()
    return table.replace_schema_metadata(raw)


def _clean(call):
    try:
        return call()
    except AspError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return None


@given(edits=st.lists(column_edits, max_size=3), meta_edits=st.lists(metadata_edits, max_size=2))
# Found by the explore profile: optional columns of the wrong type or with gaps crashed `asp report`, and a
# float seed in the recorded settings crashed `asp simulate`.
@example(edits=[("to_string", "expected_finish_s")], meta_edits=[])
@example(edits=[("null_one", "expected_finish_s")], meta_edits=[])
@example(edits=[], meta_edits=[("setting", "seed", 0.0)])
# Found by the explore profile (2026-12-02): a recorded group of 67,108,863 samples made `asp simulate` ask for
# 30 GiB (MemoryError); such settings are now a damaged schedule.
@example(edits=[], meta_edits=[("setting", "samples_per_prompt", 67108863)])
@settings(max_examples=int(os.environ.get("ASP_FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_edited_schedules_give_a_result_or_a_clean_error(made, tmp_path_factory, edits, meta_edits):
    table = _with_metadata(_edited(pq.read_table(made["schedule"]), edits), meta_edits)
    path = tmp_path_factory.mktemp("edited") / "s.parquet"
    pq.write_table(table, path)
    read = _clean(lambda: read_schedule(path))
    if read is None:
        return
    report = build_report(read)
    json.dumps(report, allow_nan=False)  # the --json document is valid JSON
    replay = _clean(lambda: open_schedule(path))
    if replay is not None:
        rows = sum(len(mb.rows) for mb in replay.minibatches())
        assert rows == replay.rows().height
    simulated = _clean(lambda: simulate_file(path, [made["lengths"]], read=replace(SIMULATE_READ, on_bad_row="skip")))
    if simulated is not None:
        assert np.isfinite(simulated.result.metrics["end_to_end_s"])
    out = path.parent / "ordered.parquet"
    _clean(lambda: export(path, [made["prompts"]], out))
