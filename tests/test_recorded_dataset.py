"""asp_cli.integrate.recorded_dataset: the files a schedule was made from, found again by name and bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from util import write_jsonl

from asp_cli.errors import InputError
from asp_cli.fingerprint import file_fingerprint
from asp_cli.integrate.recorded_dataset import DatasetFromSchedule, recorded_inputs


def _metadata(*paths: Path, given: list[str] | None = None) -> dict:
    return {"inputs": [{"name": p.name, "fingerprint": file_fingerprint(p)} for p in paths],
            "columns_used": {g: {"prompt": "question"} for g in (given or [])}}


def test_a_recorded_file_is_found_at_its_recorded_path_or_beside_the_schedule_only_with_its_bytes(tmp_path,
                                                                                                  monkeypatch):
    data, elsewhere = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    elsewhere.mkdir()
    train = write_jsonl(data / "train.jsonl", [{"question": "q"}])
    metadata = _metadata(train, given=[str(train)])
    assert recorded_inputs(elsewhere / "s.parquet", metadata) == ([train], ["train.jsonl"])  # the recorded path
    assert recorded_inputs(data / "s.parquet", _metadata(train)) == ([data / "train.jsonl"], ["train.jsonl"])
    monkeypatch.chdir(data)  # here, under its name
    assert recorded_inputs(elsewhere / "s.parquet", _metadata(train)) == ([Path("train.jsonl")], ["train.jsonl"])
    write_jsonl(train, [{"question": "another"}])  # other bytes: not the file
    assert recorded_inputs(elsewhere / "s.parquet", metadata) == (None, ["train.jsonl"])
    assert recorded_inputs(elsewhere / "s.parquet", {}) == (None, [])


def test_each_of_several_files_must_be_found_and_the_error_names_them(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"question": "a"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"question": "b"}])
    metadata = _metadata(a, b)
    read = []
    loader = DatasetFromSchedule(tmp_path / "s.parquet", metadata, lambda found: read.append(found) or "prompts")
    assert loader(Path("log.jsonl")) == "prompts" and loader(Path("other.jsonl")) == "prompts"
    assert read == [[a, b]] and loader.used == [a, b]  # read once
    b.unlink()
    with pytest.raises(InputError, match=r"^log\.jsonl: input/output text without prompt ids .*; the schedule was "
                                         r"made from a\.jsonl, b\.jsonl, not found beside it or here with the bytes it "
                                         r"recorded: pass --dataset a\.jsonl --dataset b\.jsonl \(where each is now\)"):
        DatasetFromSchedule(tmp_path / "s.parquet", metadata, lambda found: "prompts")(Path("log.jsonl"))


def test_a_schedule_kept_in_memory_finds_its_recorded_files_here(tmp_path, monkeypatch):
    """`observe(log, schedule=<a Schedule kept in memory>)` of a text log without --dataset: the schedule has no file
    to look beside (its path None), so its recorded files are looked for here; it was a TypeError from Path()."""
    data = tmp_path / "train.jsonl"
    data.write_text('{"prompt": "What is 1+1?"}\n', encoding="utf-8")
    metadata = {"inputs": [{"name": "train.jsonl", "fingerprint": file_fingerprint(data)}]}
    monkeypatch.chdir(tmp_path)
    assert recorded_inputs(None, metadata) == ([Path("train.jsonl")], ["train.jsonl"])
    monkeypatch.chdir(tmp_path.parent)
    assert recorded_inputs(None, metadata) == (None, ["train.jsonl"])
