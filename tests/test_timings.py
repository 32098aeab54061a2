"""The timeline's figures (the same definitions for measured and simulated runs) and its file checks."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from asp_cli.errors import InputError
from asp_cli.integrate.timings import COLUMNS, read_timeline, rollout_figures, write_timeline


def test_rollout_figures_on_hand_made_intervals():
    # Instance 0: [0, 4] and [1, 2] overlap, then [6, 8]: busy 6 s, last finish 8.
    # Instance 1: [0, 3]: busy 3 s, last finish 3.
    send = np.array([0.0, 1.0, 6.0, 0.0])
    finish = np.array([4.0, 2.0, 8.0, 3.0])
    figures = rollout_figures(send, finish, np.array([0, 0, 0, 1]), np.array([10, 20, 30, 40]))
    assert figures["wall_s"] == 8.0
    assert figures["instance_busy_s"] == [6.0, 3.0] and figures["instance_finish_s"] == [8.0, 3.0]
    assert figures["busy_fraction_mean"] == pytest.approx(4.5 / 8) and figures["busy_fraction_min"] == 3 / 8
    assert figures["finish_spread_s"] == 5.0
    assert figures["effective_batch"] == pytest.approx((4 + 1 + 2 + 3) / 9)  # request-seconds over busy seconds
    assert figures["response_tokens"] == 100 and figures["response_tokens_per_s"] == 12.5
    assert rollout_figures(np.zeros(0), np.zeros(0), np.zeros(0))["wall_s"] == 0.0


def test_a_timeline_round_trips_and_a_broken_one_is_refused(tmp_path):
    row = {name: None for name in COLUMNS}
    row.update(arrangement="asp", run=0, seq=0, epoch=0, prompt_id="a", sample=0, instance=0, server="s",
               minibatch=0, forced_tokens=5, planned_prompt_tokens=3, send_s=0.0, first_token_s=0.1, finish_s=0.5,
               attempts=1)
    path = tmp_path / "t.parquet"
    write_timeline(pl.DataFrame([row], schema=COLUMNS), {"engine": "blocking"}, path)
    timeline = read_timeline(path)
    assert timeline.frame.height == 1 and timeline.metadata["engine"] == "blocking"
    assert timeline.metadata["format"] == "asp.timeline"
    bad = tmp_path / "bad.parquet"
    write_timeline(pl.DataFrame([{**row, "finish_s": -1.0}], schema=COLUMNS), {}, bad)
    with pytest.raises(InputError, match="finishes before it is sent"):
        read_timeline(bad)
    with pytest.raises(InputError, match="no such timeline file"):
        read_timeline(tmp_path / "missing.parquet")
    doubled = tmp_path / "doubled.parquet"  # every request twice: calibrate fitted twice the eta_flops, unsaid
    write_timeline(pl.DataFrame([row, {**row, "sample": 1}, row], schema=COLUMNS), {}, doubled)
    with pytest.raises(InputError, match=r"2 rows repeat a request \(run 0, seq 0, sample 0 is there more than once"):
        read_timeline(doubled)


def _row(**changes):
    row = {name: None for name in COLUMNS}
    row.update(arrangement="asp", run=0, seq=0, epoch=0, prompt_id="a", sample=0, instance=0, server="s",
               minibatch=0, forced_tokens=5, planned_prompt_tokens=3, send_s=0.0, first_token_s=0.1, finish_s=0.5,
               attempts=1)
    return {**row, **changes}


def _with_document(tmp_path, raw: bytes):
    """A timeline of two good rows whose ``asp.timeline`` metadata is ``raw``, as a hand edit or a damaged disk left."""
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    write_timeline(pl.DataFrame([_row(), _row(seq=1, instance=1)], schema=COLUMNS), {"instances": 2}, path,
                   replace=True)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"asp.timeline": raw}), path)
    return path


GOOD_DOCUMENT = {"format_version": "1.0", "instances": 2, "engine": "streaming", "max_in_flight": 64,
                 "preset": "h100-qwen2.5-7b", "servers": [{"url": "s0", "kv_cache_tokens": 400000}],
                 "arrangements": [{"arrangement": "asp", "dispatch": "planned", "requests": 2}], "complete": True}


@pytest.mark.parametrize("document, words", [
    # A hostile-input round: each was an internal error (exit 70: AttributeError, ValueError, TypeError), or taken as
    # given (1.5 in-flight requests), or refused as a preset field of no file (-3: "field 'max_num_seqs'").
    ([], "(a list, where a JSON object of the run's settings belongs)"),
    (None, "(null, where a JSON object of the run's settings belongs)"),
    (5, "(a number, where a JSON object of the run's settings belongs)"),
    ("x", "(text, where a JSON object of the run's settings belongs)"),
    ({"instances": "x"}, "(field 'instances' must be a whole number from 1 to 100,000, not 'x')"),
    ({"servers": 5}, "(field 'servers' must be a list of objects, not 5)"),
    ({"servers": [{"kv_cache_tokens": -1}]}, "(servers[0].kv_cache_tokens must be a whole number from 0 to"),
    ({"max_in_flight": "x"}, "(field 'max_in_flight' must be a whole number from 1 to 2,147,483,647, not 'x')"),
    ({"max_in_flight": 1.5}, "(field 'max_in_flight' must be a whole number from 1 to 2,147,483,647, not 1.5)"),
    ({"max_in_flight": -3}, "(field 'max_in_flight' must be a whole number from 1 to 2,147,483,647, not -3)"),
    ({"max_in_flight": True}, "(field 'max_in_flight' must be a whole number from 1 to 2,147,483,647, not True)"),
    ({"engine": "fast"}, "(field 'engine' must be 'blocking' or 'streaming', not 'fast')"),
    ({"preset": 5}, "(field 'preset' must be text, not 5)"),
    ({"complete": "yes"}, "(field 'complete' must be true or false, not 'yes')"),
    ({"arrangements": [{"arrangement": "asp", "dispatch": "any"}]}, "(arrangements[0].dispatch must be 'planned' or"),
    ({"arrangements": [{"arrangement": "asp", "requests": 2.5}]}, "(arrangements[0].requests must be a whole number"),
    # Read loosely, by the part before the first dot: each was read as format 1. Now the schedule's rule and words.
    ({"format_version": "1.0.0"}, "(format_version '1.0.0' is not text \"MAJOR.MINOR\" of two whole numbers)"),
    ({"format_version": "1"}, "(format_version '1' is not text \"MAJOR.MINOR\" of two whole numbers)"),
    ({"format_version": 1.0}, "(format_version 1.0 is not text \"MAJOR.MINOR\" of two whole numbers)"),
    ({"format_version": "01.0"}, "(format_version '01.0' is not text \"MAJOR.MINOR\" of two whole numbers)"),
    ({"format_version": "1.x"}, "(format_version '1.x' is not text \"MAJOR.MINOR\" of two whole numbers)"),
    ({"format_version": None}, "(format_version None is not text \"MAJOR.MINOR\" of two whole numbers)"),
])
def test_damaged_timeline_metadata_is_refused_naming_the_field(tmp_path, document, words):
    import json

    raw = json.dumps({**GOOD_DOCUMENT, **document} if isinstance(document, dict) else document).encode()
    path = _with_document(tmp_path, raw)
    with pytest.raises(InputError) as caught:
        read_timeline(path)
    assert str(caught.value).startswith(f"{path}: damaged asp timeline metadata {words}"), str(caught.value)
    assert str(caught.value).endswith("; record the timeline again with asp replay -o")


def test_a_timeline_of_another_major_format_is_refused_and_any_minor_of_its_own_read(tmp_path):
    import json

    for version in ("1.999", "1.0"):
        path = _with_document(tmp_path, json.dumps({**GOOD_DOCUMENT, "format_version": version}).encode())
        assert read_timeline(path).metadata["instances"] == 2
    no_version = {k: v for k, v in GOOD_DOCUMENT.items() if k != "format_version"}  # hand-made: read as 1.0
    assert read_timeline(_with_document(tmp_path, json.dumps(no_version).encode())).metadata["instances"] == 2
    path = _with_document(tmp_path, json.dumps({**GOOD_DOCUMENT, "format_version": "2.0"}).encode())
    with pytest.raises(InputError, match=r"timeline format 2\.0 is not the one this asp reads \(1\.0\); use the asp"):
        read_timeline(path)


def test_a_good_document_and_its_nulls_are_read(tmp_path):
    import json

    assert read_timeline(_with_document(tmp_path, json.dumps(GOOD_DOCUMENT).encode())).metadata["instances"] == 2
    nulls = {key: None for key in GOOD_DOCUMENT if key != "format_version"}  # null: not recorded
    assert read_timeline(_with_document(tmp_path, json.dumps(nulls).encode())).metadata["max_in_flight"] is None


@pytest.mark.parametrize("changes, words", [
    # A hostile-input round: a send at -30 s dropped 893 of 1,022 requests from the fit without a word, -1e9 wrote
    # eta_bandwidth 4.5e6; 2**62 completion tokens wrote a preset; times of 1e300 s were "SVD did not converge" (exit
    # 70); instance 99 of 2 was told to "pass --instances 100, or --dispatch free", options calibrate has not.
    ({"send_s": -30.0}, "row 2: column 'send_s' is -30 (run 0, seq 1, sample 0): times are seconds from 0 (the "
                        "run's start) to 1e+09"),
    ({"send_s": -1e9}, "row 2: column 'send_s' is -1e+09"),
    ({"first_token_s": 1e300, "finish_s": 1e300}, "row 2: column 'finish_s' is 1e+300"),
    ({"completion_tokens": 2**62}, "row 2: column 'completion_tokens' is 4,611,686,018,427,387,904 (run 0, seq 1, "
                                   "sample 0): token counts are whole numbers from 0 to 2,147,483,647"),
    ({"prompt_tokens": -1}, "row 2: column 'prompt_tokens' is -1"),
    ({"forced_tokens": None}, "row 2: column 'forced_tokens' is missing"),
    ({"instance": 99}, "row 2: column 'instance' is 99 (run 0, seq 1, sample 0): the timeline's metadata records 2 "
                       "instances, numbered 0 to 1"),
    ({"instance": -1}, "row 2: column 'instance' is -1"),
    ({"sample": None}, "row 2: column 'sample' is missing (run 0, seq 1, sample None): a request is numbered by its "
                       "run and seq (from 0) and sample (0 to 4,095)"),
    ({"arrangement": None}, "row 2: column 'arrangement' is missing"),
])
def test_a_row_out_of_range_is_refused_with_its_place(tmp_path, changes, words):
    path = tmp_path / "t.parquet"
    write_timeline(pl.DataFrame([_row(), _row(seq=1, **changes)], schema=COLUMNS), {"instances": 2}, path)
    with pytest.raises(InputError) as caught:
        read_timeline(path)
    assert str(caught.value).startswith(f"{path}: {words}"), str(caught.value)
    assert str(caught.value).endswith("; record the timeline again with asp replay -o")


def test_one_broken_row_is_said_in_the_singular(tmp_path):
    # It read "1 rows have a missing ... or finish before they are sent".
    bad = tmp_path / "bad.parquet"
    write_timeline(pl.DataFrame([_row(finish_s=-1.0)], schema=COLUMNS), {}, bad)
    with pytest.raises(InputError, match=r"bad\.parquet: 1 row has a missing or non-finite \(NaN, infinite\) send or "
                                         r"finish time, or finishes before it is sent; give the file"):
        read_timeline(bad)
    odd = tmp_path / "odd.parquet"
    write_timeline(pl.DataFrame([_row(first_token_s=9.0)], schema=COLUMNS), {}, odd)
    with pytest.raises(InputError, match=r"odd\.parquet: 1 row has a first-token time that is not finite or not "
                                         r"between its send and finish times"):
        read_timeline(odd)
