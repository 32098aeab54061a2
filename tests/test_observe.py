"""Observe: rollout logs in, a validated history out; nothing dropped without a count."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pytest
from _schedules import PROMPTS, SAMPLES, built  # noqa: F401 - fixture
from util import write_jsonl

from asp_cli.errors import InputError, OutputError, SettingsError
from asp_cli.integrate.observe import OBSERVE_READ, observe, read_history
from asp_cli.reading import read_lengths


def _log(path, ids, tokens=100, epoch=None):
    rows = []
    for i, prompt_id in enumerate(ids):
        for sample in range(SAMPLES):
            row = {"prompt_id": prompt_id, "sample": sample, "response_tokens": tokens + i + sample}
            if epoch is not None:
                row["epoch"] = epoch
            rows.append(row)
    return write_jsonl(path, rows)


def test_a_log_becomes_a_history_schedule_can_read(built, tmp_path):  # noqa: F811
    log = _log(tmp_path / "r.jsonl", [f"p{i}" for i in range(PROMPTS)])
    out = tmp_path / "history.parquet"
    result = observe([log], out, schedule=built["schedule"], epoch=0)
    assert result.summary["rows_added"] == PROMPTS * SAMPLES
    assert result.summary["scheduled_prompts_without_samples"] == 0
    history, logs = read_history(out)
    assert history.columns == ["prompt_id", "response_tokens", "truncated", "epoch", "log"]
    assert history["epoch"].unique().to_list() == [0]
    assert history["truncated"].unique().to_list() == [False]
    assert logs[0]["name"] == "r.jsonl" and logs[0]["rows"] == PROMPTS * SAMPLES
    frame, _ = read_lengths([out])
    assert frame.height == PROMPTS * SAMPLES


def test_append_adds_and_the_same_log_is_not_added_twice(built, tmp_path):  # noqa: F811
    out = tmp_path / "h.parquet"
    first = _log(tmp_path / "e0.jsonl", ["p1", "p2"], epoch=0)
    second = _log(tmp_path / "e1.jsonl", ["p1", "p3"], tokens=200, epoch=1)
    observe([first], out)
    with pytest.raises(OutputError, match="--force"):
        observe([second], out)
    result = observe([second], out, append=True)
    assert result.summary["history_rows"] == 4 * SAMPLES
    again = observe([first, second], out, append=True)
    assert again.summary["logs_already_observed"] == 2 and again.summary["rows_added"] == 0
    assert any("already in the history" in w for w in again.warnings)
    history, _ = read_history(out)
    assert history.height == 4 * SAMPLES and sorted(history["epoch"].unique().to_list()) == [0, 1]


def test_unknown_ids_are_counted_skipped_kept_or_refused(built, tmp_path):  # noqa: F811
    log = _log(tmp_path / "r.jsonl", ["p1", "ghost", "p2", "ghost2"])
    skipped = observe([log], None, schedule=built["schedule"])
    assert skipped.summary["unknown_id_rows"] == 2 * SAMPLES and skipped.summary["unknown_ids"] == 2
    assert skipped.added.height == 2 * SAMPLES
    assert any("left out" in w for w in skipped.warnings)
    kept = observe([log], None, schedule=built["schedule"], unknown_ids="keep")
    assert kept.added.height == 4 * SAMPLES
    with pytest.raises(InputError, match="'ghost'"):
        observe([log], None, schedule=built["schedule"], unknown_ids="error")
    by_dataset = observe([log], None, dataset=[built["prompts"]])
    assert by_dataset.summary["unknown_ids"] == 2


def test_when_every_id_is_unknown_the_error_says_so_with_the_count_and_the_fix(built, tmp_path):  # noqa: F811
    # It said only "no usable rows in the logs", though every row had been dropped as an unknown id.
    log = _log(tmp_path / "r.jsonl", ["ghost", "ghost2", "ghost3"])
    with pytest.raises(InputError) as caught:
        observe([log], tmp_path / "h.parquet", schedule=built["schedule"])
    message = str(caught.value)
    assert message.startswith(f"nothing to write: all {3 * SAMPLES} rows were left out because their prompt ids "
                              "(3 ids, e.g. 'ghost', 'ghost2', 'ghost3') are not in the schedule;")
    assert "--unknown-ids keep" in message and "--id-key" in message
    assert not (tmp_path / "h.parquet").exists()


def test_bad_rows_stop_or_are_counted(tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"prompt_id": "p1", "response_tokens": 10}\n{"prompt_id": "p2", "response_tokens": -4}\n'
                   '{"prompt_id": "p3", "response_tokens": 12}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2"):
        observe([log], tmp_path / "h.parquet")
    assert not (tmp_path / "h.parquet").exists()
    result = observe([log], tmp_path / "h.parquet", read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.summary["bad_rows"] == 1 and result.summary["rows_added"] == 2
    assert any("skipped 1 bad rows" in w for w in result.warnings)


def test_capped_samples_are_marked_truncated(built, tmp_path):  # noqa: F811
    log = tmp_path / "cap.csv"
    log.write_text("id,completion_tokens\np1,4096\np1,5000\np2,10\n")
    result = observe([log], None, schedule=built["schedule"])
    assert result.added["truncated"].to_list() == [True, True, False]
    assert result.summary["rows_over_max_response_tokens"] == 1


def test_parquet_log_with_a_list_of_lengths_per_prompt(tmp_path):
    log = tmp_path / "lists.parquet"
    pl.DataFrame({"uid": ["p1", "p2"], "response_length": [[1, 2, 3], [4, 5]]}).write_parquet(log)
    result = observe([log], None)
    assert result.added["response_tokens"].to_list() == [1, 2, 3, 4, 5]


def test_verl_generation_dump_is_matched_through_the_dataset(built, tmp_path):  # noqa: F811
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()]
    dump = tmp_path / "12.jsonl"
    rows = []
    for row in prompts[:3]:
        templated = f"<|im_start|>user\n{row['question']}<|im_end|>\n<|im_start|>assistant\n"
        rows.append({"input": templated, "output": "x" * 400, "gts": "1", "score": 1.0, "step": 12})
    rows.append({"input": "<|im_start|>user\nnot a dataset prompt<|im_end|>", "output": "y", "score": 0.0, "step": 12})
    write_jsonl(dump, rows)
    short = write_jsonl(tmp_path / "short.jsonl", [{"id": "s1", "question": "Add 2+2."}, {"id": "s2", "question": "Add 2+2 and 3."}])
    tiny = write_jsonl(tmp_path / "1.jsonl", [{"input": "user: Add 2+2 and 3.\nassistant:", "output": "abcd"}])
    assert observe([tiny], None, dataset=[short]).added["prompt_id"].to_list() == ["s2"]
    with pytest.raises(InputError, match="--dataset"):
        observe([dump], None)
    result = observe([dump], None, dataset=[built["prompts"]], read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.added["prompt_id"].to_list() == [p["id"] for p in prompts[:3]]
    assert result.added["response_tokens"].to_list() == [100, 100, 100]
    assert result.summary["bad_rows"] == 1 and result.summary["estimated_lengths"] == 4
    assert any("estimated" in w for w in result.warnings)


def test_append_to_a_file_that_is_not_a_history(tmp_path):
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    log = _log(tmp_path / "r.jsonl", ["p1"])
    with pytest.raises(InputError, match="not an asp history"):
        observe([log], other, append=True)


def test_missing_columns_name_observes_own_options(tmp_path):
    """The error named --history-id-key / --history-length-key; `asp observe` calls them --id-key / --length-key."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "tokens": 10}])
    with pytest.raises(InputError, match="name the right one with --length-key$"):
        observe([log], tmp_path / "h.parquet")
    assert observe([log], tmp_path / "h.parquet", read=replace(OBSERVE_READ, length_key="tokens")).summary["rows_added"] == 1


@pytest.mark.parametrize("epoch", [-1, 2**31, 10**20])
def test_epoch_out_of_range_is_a_settings_error(tmp_path, epoch):
    """--epoch -1 was recorded as is; a huge one was an internal error (exit 70)."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "response_tokens": 10}])
    with pytest.raises(SettingsError, match=r"--epoch must be a whole number from 0 to 2147483647"):
        observe([log], tmp_path / "h.parquet", epoch=epoch)
    assert not (tmp_path / "h.parquet").exists()


def test_history_must_be_named_parquet(tmp_path):
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "response_tokens": 10}])
    with pytest.raises(SettingsError, match=r"h\.jsonl: asp observe writes Parquet, but the name ends in .\.jsonl.; name it \.parquet"):
        observe([log], tmp_path / "h.jsonl")
    assert not (tmp_path / "h.jsonl").exists()


def test_verl_generation_output_is_read_as_samples(tmp_path):
    """verl.trainer.main_generation_server (verl 0.9.1) writes the dataset's rows plus `responses`, a list of the
    n response texts of each prompt; each text is one sample, counted at 4 bytes per token without a tokenizer."""
    frame = pl.DataFrame({"data_source": ["a", "b"], "id": ["q1", "q2"],
                          "prompt": [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]],
                          "responses": [["x" * 40, "y" * 400], ["z" * 8, "w" * 80]]})
    log = tmp_path / "gen.parquet"
    frame.write_parquet(log)
    result = observe([log], tmp_path / "h.parquet")
    assert result.added.select("prompt_id", "response_tokens").rows() == [("q1", 10), ("q1", 100), ("q2", 2),
                                                                          ("q2", 20)]
    assert result.summary["estimated_lengths"] == 4
    assert any("estimated from text" in w for w in result.warnings)


def test_a_missing_log_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="no such rollout log"):
        observe([tmp_path / "absent.jsonl"], tmp_path / "h.parquet")
