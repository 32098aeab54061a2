"""asp_cli.reading.id_forms: ids written another way (spaces around them, a number as text in one file and as a
number in the other) match nothing, and every place that matches lengths to prompts by id says which would match
and how they differ, instead of only counting them (a hostile-input round, 2026-12-06)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from util import make_prompts, write_jsonl

from asp_cli.arrange.pipeline import schedule
from asp_cli.errors import InputError
from asp_cli.integrate.observe import observe
from asp_cli.reading.id_forms import near_misses
from asp_cli.settings import ScheduleSettings
from asp_cli.sim.lengths import lengths_for_schedule, refuse_unmatched

SETTINGS = ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=8, minibatch_size=4)


@pytest.mark.parametrize(("theirs", "ours", "how"), [
    ("q1", "q1 ", "spaces"), (" q1\t", "q1", "spaces"),
    ("1", "1.0", "number"), ("1.00", "1", "number"), ("007", "7", "number"), ("+3", "3", "number"),
    ("-0", "0", "number"), ("-12.0", "-12", "number"), ("0", "000", "number"),
])
def test_an_id_written_another_way_is_found_with_how_it_differs(theirs, ours, how):
    found = near_misses(pl.Series([theirs, "nowhere"]), pl.Series(["a", ours]))
    assert found is not None and (found.count, found.theirs, found.ours, found.how) == (1, theirs, ours, how)
    assert repr(theirs) in found.clause() and repr(ours) in found.clause() and "alike" in found.clause()


@pytest.mark.parametrize(("theirs", "ours"), [
    ("Q1", "q1"), ("q-1", "q1"), ("1.5", "1"), ("10", "1"), ("1e3", "1000"), ("q 1", "q1"), ("-1", "1"),
])
def test_ids_that_differ_otherwise_are_not_near_misses(theirs, ours):
    assert near_misses(pl.Series([theirs]), pl.Series([ours])) is None
    assert near_misses(pl.Series([], dtype=pl.String), pl.Series([ours])) is None


def test_near_misses_count_distinct_unmatched_ids_and_take_any_iterable_of_known_ids():
    found = near_misses(pl.Series(["1", "1", "2.0", "x"]), {"1.0", "2", "y"})
    assert found is not None and found.count == 2


def _prompts_with_spaced_ids(path, count=24):
    rows = make_prompts(count)
    for row in rows:
        row["id"] = f"{row['id']} "
    return write_jsonl(path, rows)


def _lengths(path, ids, key="prompt_id"):
    return write_jsonl(path, [{key: i, "response_tokens": 40 + 5 * n} for n, i in enumerate(ids) for _ in range(2)])


def test_a_history_whose_ids_differ_by_spaces_is_said_with_the_pair_and_the_fix(tmp_path):
    prompts = _prompts_with_spaced_ids(tmp_path / "p.jsonl")
    history = _lengths(tmp_path / "h.jsonl", [f"p{i}" for i in range(24)])
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS, history=history)
    said = [w for w in made.summary["warnings"] if "--history" in w and "alike" in w]
    assert len(said) == 1 and said[0].startswith("none of the 24 prompt ids in --history")
    assert "'p0' in --history and 'p0 ' among the prompts" in said[0] and "by spaces" in said[0]


def test_a_history_whose_numbers_are_written_as_text_in_the_prompts_is_said(tmp_path):
    # A CSV's id 1.0 is text; a JSON 1.0 is the number 1: half the prompts' ids are such text here.
    rows = make_prompts(24)
    for i, row in enumerate(rows):
        row["id"] = f"{i}.0" if i % 2 else i
    prompts = write_jsonl(tmp_path / "p.jsonl", rows)
    history = tmp_path / "h.jsonl"
    history.write_text("".join(json.dumps({"prompt_id": float(i), "response_tokens": 50}) + "\n" for i in range(24)))
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS, history=history)
    said = [w for w in made.summary["warnings"] if "alike" in w]
    assert len(said) == 1 and said[0].startswith("12 of the 24 prompt ids in --history are not among the prompts")
    assert "12 of them differ" in said[0] and "'1' in --history and '1.0' among the prompts" in said[0]


def test_unmatched_ids_that_differ_otherwise_keep_the_old_advice(tmp_path):
    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(24))
    history = _lengths(tmp_path / "h.jsonl", [f"other{i}" for i in range(24)])
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS, history=history)
    said = [w for w in made.summary["warnings"] if "--history" in w and "among the prompts" in w]
    assert len(said) == 1 and "check --history-id-key" in said[0] and "alike" not in said[0]


def test_observe_says_the_near_misses_in_its_warning_json_and_errors(tmp_path):
    prompts = _prompts_with_spaced_ids(tmp_path / "p.jsonl")
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS)
    half = _lengths(tmp_path / "half.jsonl", [f"p{i} " for i in range(12)] + [f"p{i}" for i in range(12, 24)])
    result = observe([half], tmp_path / "h.parquet", schedule=made.output)
    assert "'p12' in the log and 'p12 ' in the schedule" in result.summary["unknown_ids_written_otherwise"]
    assert any("12 of them differ" in w and "alike" in w for w in result.warnings)
    assert pl.read_parquet(tmp_path / "h.parquet").height == 24  # the matched half kept, the rest left out
    spaced = _lengths(tmp_path / "all.jsonl", [f"p{i}" for i in range(24)])
    with pytest.raises(InputError, match="nothing to write: .*24 of them differ from an id in the schedule only by spaces"):
        observe([spaced], tmp_path / "h2.parquet", schedule=made.output)
    with pytest.raises(InputError, match="name prompts the schedule does not hold; 24 of them differ .* alike"):
        observe([spaced], tmp_path / "h3.parquet", schedule=made.output, unknown_ids="error")
    assert not (tmp_path / "h2.parquet").exists() and not (tmp_path / "h3.parquet").exists()


def test_simulated_lengths_say_the_near_misses_and_refuse_when_none_match(tmp_path):
    frame = pl.DataFrame({"prompt_id": ["1", "2", "3"], "predicted_tokens": [10, 20, 30]})
    observed = pl.DataFrame({"prompt_id": ["1", "02", "3.0"], "response_tokens": [11, 22, 33]})
    _tokens, info = lengths_for_schedule(frame, observed, samples_per_prompt=1)
    warning = " ".join(info.warnings(1000))
    assert "2 of the 3 prompt ids of --lengths are not in the schedule" in warning
    assert "2 of them differ" in warning and "'02' in --lengths and '2' in the schedule" in warning
    with pytest.raises(InputError, match="'q' in --lengths and 'q ' in the schedule: write the ids alike"):
        refuse_unmatched(pl.DataFrame({"prompt_id": ["q"]}), pl.Series(["q "]), ["l.jsonl"])


def test_row_numbers_are_no_near_misses_of_another_column_and_the_id_key_advice_stays(tmp_path):
    """A review: prompts without an id column are numbered 0..n-1, and a history keyed "001".."040" (another
    column of those prompts) was told to write its ids "alike", which would give each prompt the next one's
    lengths; the fix is --id-key, as before."""
    assert near_misses(pl.Series(["001", "002"]), pl.Series([str(i) for i in range(40)])) is None
    assert near_misses(pl.Series(["007"]), [7, 8]) is not None  # a plain list of ints, not 0..n-1
    rows = make_prompts(24)
    for i, row in enumerate(rows):
        row["key_x"] = f"{i + 1:03d}"
        del row["id"]
    prompts = write_jsonl(tmp_path / "p.jsonl", rows)
    history = _lengths(tmp_path / "h.jsonl", [f"{i + 1:03d}" for i in range(24)])
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS, history=history)
    said = [w for w in made.summary["warnings"] if "--history" in w and "among the prompts" in w]
    assert len(said) == 1 and "name the prompts' id column with --id-key" in said[0] and "alike" not in said[0]
    with pytest.raises(InputError) as refused:
        observe([history], tmp_path / "h.parquet", dataset=[prompts])
    assert "alike" not in str(refused.value)


def test_report_lengths_say_the_near_misses(tmp_path):
    from asp_cli.report.files import report_schedule

    prompts = _prompts_with_spaced_ids(tmp_path / "p.jsonl")
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS)
    half = _lengths(tmp_path / "half.jsonl", [f"p{i} " for i in range(12)] + [f"p{i}" for i in range(12, 24)])
    said = [w for w in report_schedule(made.output, lengths=[half]).warnings if "not in the schedule" in w]
    assert len(said) == 1 and "'p12' in --lengths and 'p12 ' in the schedule: write the ids alike" in said[0]
