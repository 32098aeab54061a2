"""Streamed reading (`asp_cli.reading.stream`): the same prompts, reports, errors and schedules as a whole-file read,
in every format, whatever the batch size; and the batches of a file that disagree with its whole are read whole."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asp_cli.predict.streamed as streamed
from asp_cli import columns as C
from asp_cli.errors import InputError, SettingsError
from asp_cli.reading import read_prompts
from asp_cli.reading.options import ReadOptions
from asp_cli.reading.stream import read_prompts_streamed

from util import SAMPLE_PROMPTS, make_prompts, write_jsonl

KEPT = (C.PROMPT_TEXT, C.N_MESSAGES)
COLUMNS = [C.ROW, C.PROMPT_ID, C.DATA_SOURCE, C.DIFFICULTY, *KEPT]


def _streamed(paths, options=ReadOptions(), batch_bytes=256, rows=3):
    return read_prompts_streamed(paths, options, keep=lambda b: b.select(KEPT), batch_bytes=batch_bytes,
                                 parquet_batch_rows=rows)


def _assert_same(paths, options=ReadOptions(), **size):
    whole, whole_report = read_prompts(paths, options)
    frame, report = _streamed(paths, options, **size)
    assert frame.select(COLUMNS).equals(whole.select(COLUMNS)), (frame, whole)
    assert frame.schema == whole.select(COLUMNS).schema
    assert report.skipped_rows == whole_report.skipped_rows
    assert report.columns_used == whole_report.columns_used
    assert report.fingerprints == whole_report.fingerprints
    assert report.rows == whole_report.rows
    return frame, report


def _errors(paths, options=ReadOptions(), **size) -> tuple[str, str]:
    with pytest.raises(InputError) as whole:
        read_prompts(paths, options)
    with pytest.raises(InputError) as batched:
        _streamed(paths, options, **size)
    return str(whole.value), str(batched.value)


def _rows(count: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i, row in enumerate(make_prompts(count, seed)):
        chat = [{"role": "user", "content": row["question"]}]
        rows.append({"id": f"q{i}", "prompt": chat, "data_source": row["data_source"],
                     "difficulty": float(rng.integers(1, 6))})
    return rows


# --------------------------------------------------------------------------------------------------------
# The same prompts as a whole-file read


@pytest.mark.parametrize("batch_bytes", [64, 4096, 1 << 16, 1 << 30])
def test_sample_data_streams_to_the_whole_file_read(batch_bytes):
    frame, _ = _assert_same([SAMPLE_PROMPTS], batch_bytes=batch_bytes)
    assert frame.height == 3540


def _write(path: Path, rows: list[dict]) -> Path:
    """Write rows as the file name says: JSON lines, a JSON array, CSV/TSV (chat lists as text) or Parquet; .gz too."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl"):
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    elif name.endswith(".json"):
        data = json.dumps(rows).encode()
    else:
        flat = pl.DataFrame([{**r, **({"prompt": r["prompt"][0]["content"]} if isinstance(r.get("prompt"), list)
                                      else {})} for r in rows])
        buffer = __import__("io").BytesIO()
        if name.endswith(".parquet"):
            pl.DataFrame(rows).write_parquet(buffer, row_group_size=7)
        else:
            flat.write_csv(buffer, separator="\t" if name.endswith(".tsv") else ",")
        data = buffer.getvalue()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("name", ["p.jsonl", "p.jsonl.gz", "p.json", "p.csv", "p.csv.gz", "p.tsv", "p.parquet",
                                  "p.parquet.gz"])
def test_every_format_streams_to_the_whole_file_read(tmp_path, name):
    rows = _rows(120)
    rows[5]["prompt"][0]["content"] = 'a "quoted", multi-line\nprompt'  # quotes and a newline inside a CSV field
    path = _write(tmp_path / name, rows)
    frame, report = _assert_same([path], batch_bytes=300, rows=11)
    assert frame.height == 120
    assert report.fingerprints[str(path)] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_several_files_number_rows_across_files(tmp_path):
    first = [{"question": r["question"]} for r in make_prompts(40)]  # no id column: ids are row numbers
    second = [{"question": r["question"]} for r in make_prompts(30, seed=1)]
    paths = [write_jsonl(tmp_path / "a.jsonl", first), _write(tmp_path / "b.csv", second)]
    frame, _ = _assert_same(paths, batch_bytes=200)
    assert frame[C.PROMPT_ID].to_list() == [str(i) for i in range(70)]


def test_bad_rows_are_skipped_as_the_whole_file_read_skips_them(tmp_path):
    rows = _rows(60)
    rows[3]["prompt"] = None  # not text: a bad prompt
    del rows[10]["id"]  # no id
    lines = [json.dumps(r) for r in rows]
    lines[20] = '{"id": "broken", "prompt": [{"role": "user", '  # malformed JSON
    lines[41] = "   "  # a blank line takes a line number and no row
    lines[50] = b"\xff\xfe".decode("latin-1")  # not UTF-8 once written as Latin-1 bytes below
    data = ("\n".join(lines) + "\n").encode("utf-8").replace("ÿþ".encode(), b"\xff\xfe")
    for path in (tmp_path / "p.jsonl", tmp_path / "p.jsonl.gz"):
        path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
        frame, report = _assert_same([path], ReadOptions(on_bad_row="skip"), batch_bytes=500)
        assert report.skipped_rows == 4
        assert frame.height == 55  # 60 lines, one blank, four bad
        assert sorted(report.skipped_examples) == sorted(f"{path}:{n}" for n in (4, 11, 21, 51))


def test_errors_name_the_file_and_line_of_the_whole_file_read(tmp_path):
    rows = _rows(80)
    lines = [json.dumps(r) for r in rows]
    lines[61] = '{"id": "x", "prompt": '
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole, batched = _errors([path], batch_bytes=400)
    assert batched == whole == f"{path}:62: malformed JSON at column 23 (Expecting value); fix the row, or pass " \
                               "--on-bad-row skip to skip bad rows"
    rows[70]["prompt"] = None  # no prompt: found by the extraction, not the parser
    write_jsonl(path, rows)
    whole, batched = _errors([path], batch_bytes=400)
    assert batched == whole and f"{path}:71:" in batched
    rows[70]["prompt"] = [{"role": "user", "content": "fine"}]
    rows[75]["id"] = None
    write_jsonl(path, rows)
    whole, batched = _errors([path], batch_bytes=400)
    assert batched == whole and f"{path}:76:" in batched and "(the id) is missing" in batched


@pytest.mark.parametrize("name,content,fragment", [
    ("e.jsonl", b"", "the file is empty"),
    ("e.jsonl", b"  \n\n", "the file is empty"),
    ("e.jsonl", b'[{"a": 1}]', "holds a JSON array"),
    ("e.csv", b"PAR1xxxx", "the name says CSV but the file looks like a Parquet file"),
    ("e.jsonl", gzip.compress(b'{"a": 1}\n', mtime=0), "looks like gzip data"),
    ("e.parquet", b'{"a": 1}\n', "the name says Parquet"),
    ("e.jsonl.gz", b"not gzip at all", "not a valid gzip file"),
    # cut short (a log still being written): it was told to drop the .gz suffix
    ("e.jsonl.gz", gzip.compress(b'{"question": "q"}\n' * 500, mtime=0)[:40], "the compressed file ends before its end "
                                                                             "(cut short"),
    ("e.csv", b"question,id\n", "has a header but no rows"),
])
def test_bad_files_get_the_whole_file_error(tmp_path, name, content, fragment):
    path = tmp_path / name
    path.write_bytes(content)
    whole, batched = _errors([path])
    assert fragment in whole and fragment in batched


def test_duplicate_ids_across_batches_and_files(tmp_path):
    rows = _rows(30)
    rows[25]["id"] = rows[2]["id"]
    others = [{**r, "id": f"r{i}"} for i, r in enumerate(_rows(5))]
    others[0]["id"] = rows[2]["id"]
    paths = [write_jsonl(tmp_path / "a.jsonl", rows), write_jsonl(tmp_path / "b.jsonl", others)]
    whole, batched = _errors(paths, batch_bytes=300)
    assert batched == whole and "a.jsonl:3, " in batched and "b.jsonl:1" in batched


# --------------------------------------------------------------------------------------------------------
# Batches that disagree with the whole file: read whole, with the whole file's result


def _mixed_file(tmp_path: Path, case: str) -> Path:
    rows = [{"id": f"m{i}", "question": f"what is {i} plus {i}?", "data_source": "s"} for i in range(60)]
    if case == "id type changes":
        for r in rows[:30]:
            r["id"] = int(r["id"][1:])
    elif case == "prompt column appears late":
        rows[45]["prompt"] = [{"role": "user", "content": "a chat prompt"}]
    elif case == "chat json flag flips":
        for r in rows[:40]:
            r["question"] = json.dumps([{"role": "user", "content": r["question"]}])
    elif case == "source type changes":
        for r in rows[30:]:
            r["data_source"] = 5
    elif case == "source null early":
        for r in rows[:30]:
            r["data_source"] = None
    elif case == "source absent early":
        for r in rows[:30]:
            del r["data_source"]
    elif case == "other source late":
        for r in rows[:30]:
            del r["data_source"]
            r["subject"] = "algebra"
    elif case == "id appears late":
        for r in rows[:30]:
            del r["id"]
    return write_jsonl(tmp_path / "m.jsonl", rows)


@pytest.mark.parametrize("case", ["id type changes", "prompt column appears late", "chat json flag flips",
                                  "source type changes", "source null early", "source absent early",
                                  "other source late", "id appears late"])
@pytest.mark.parametrize("on_bad_row", ["error", "skip"])
def test_batches_that_disagree_give_the_whole_file_result(tmp_path, case, on_bad_row):
    path = _mixed_file(tmp_path, case)
    options = ReadOptions(on_bad_row=on_bad_row)
    try:
        read_prompts([path], options)
    except InputError:
        whole, batched = _errors([path], options, batch_bytes=300)
        assert batched == whole
        return
    _assert_same([path], options, batch_bytes=300)


_VALUES = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["a", "b", "Level 3", "[{", "x y"]),
                    st.floats(0, 5, allow_nan=False), st.booleans(),
                    st.just([{"role": "user", "content": "hi there"}]), st.just([{"role": "user"}]))


@settings(max_examples=int(__import__("os").environ.get("ASP_STREAM_EXAMPLES", "60")), deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.integers(0, 10**6), st.text("abc", min_size=1, max_size=3)),
    "question": st.one_of(st.text("ab $x", max_size=8), st.none()),
    "prompt": _VALUES, "data_source": _VALUES, "difficulty": _VALUES,
}), min_size=1, max_size=25), batch_bytes=st.integers(1, 400), on_bad_row=st.sampled_from(["error", "skip"]))
def test_any_jsonl_streams_to_the_whole_file_result(tmp_path_factory, rows, batch_bytes, on_bad_row):
    path = write_jsonl(tmp_path_factory.mktemp("p") / "p.jsonl", rows)
    options = ReadOptions(on_bad_row=on_bad_row)
    try:
        read_prompts([path], options)
    except InputError as exc:
        with pytest.raises(InputError):
            _streamed([path], options, batch_bytes=batch_bytes)
        del exc
        return
    _assert_same([path], options, batch_bytes=batch_bytes)


# --------------------------------------------------------------------------------------------------------
# The schedule, byte for byte


def _whole_file_read_and_predict(inputs, read, *, predictor=None, predictions=(), predictions_fingerprint=None,
                                 history=None, history_fingerprint=None, samples_per_prompt=8,
                                 max_response_tokens=8192, plan_with="max", batch_bytes=None):
    """What `asp schedule` did before streaming: read every file whole, then predict once."""
    from asp_cli.predict.prediction import predict_lengths
    from asp_cli.predict.predictions_file import predictions_from_files

    prompts, report = read_prompts(inputs, read)
    if predictions:
        predicted, info = predictions_from_files(prompts, predictions, fingerprint=predictions_fingerprint,
                                                 max_response_tokens=max_response_tokens, plan_with=plan_with)
    else:
        predicted, info = predict_lengths(prompts, predictor=predictor, history=history,
                                          history_fingerprint=history_fingerprint,
                                          samples_per_prompt=samples_per_prompt,
                                          max_response_tokens=max_response_tokens, plan_with=plan_with,
                                          tokenizer=read.tokenizer)
    return prompts.select(C.ROW, C.PROMPT_ID, C.DATA_SOURCE, C.DIFFICULTY), predicted, info, report


@pytest.mark.parametrize("name", ["p.jsonl.gz", "p.csv", "p.parquet"])
@pytest.mark.parametrize("with_history", [False, True])
def test_the_schedule_is_byte_identical_to_the_whole_file_read(tmp_path, monkeypatch, name, with_history):
    from asp_cli import schedule
    from asp_cli.settings import ScheduleSettings

    if name == "p.jsonl.gz":
        rows = [json.loads(line) for line in SAMPLE_PROMPTS.read_text().splitlines()[:1200]]
        rows[7]["prompt"] = None  # one bad row, skipped
    else:
        rows = _rows(900)
    path = _write(tmp_path / name, rows)
    history = []
    if with_history:
        ids = [str(r.get("id", i)) for i, r in enumerate(rows)][:200:3]
        history = [write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": p, "response_tokens": 100 + 7 * i}
                                                      for i, p in enumerate(ids)])]
    settings_ = ScheduleSettings(instances=4, epochs=2)
    read = ReadOptions(on_bad_row="skip")
    monkeypatch.setattr("asp_cli.reading.stream.BATCH_BYTES", 2000)
    monkeypatch.setattr("asp_cli.reading.stream.PARQUET_BATCH_ROWS", 50)
    batched = schedule([path], tmp_path / "streamed.parquet", settings=settings_, read=read, history=history)
    monkeypatch.setattr(streamed, "read_and_predict", _whole_file_read_and_predict)
    whole = schedule([path], tmp_path / "whole.parquet", settings=settings_, read=read, history=history)
    assert batched.frame.equals(whole.frame)
    assert (tmp_path / "streamed.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_predictions_files_plan_the_same_streamed(tmp_path, monkeypatch):
    from asp_cli import predict_file, schedule

    path = _write(tmp_path / "p.csv", _rows(300))
    predict_file([path], tmp_path / "pred.parquet")
    table = pl.read_parquet(tmp_path / "pred.parquet").drop(C.PROMPT_TOKENS)  # prompt tokens from the text
    table.write_parquet(tmp_path / "pred.parquet")
    monkeypatch.setattr("asp_cli.reading.stream.BATCH_BYTES", 1000)
    batched = schedule([path], tmp_path / "a.parquet", predictions=[tmp_path / "pred.parquet"])
    monkeypatch.setattr(streamed, "read_and_predict", _whole_file_read_and_predict)
    whole = schedule([path], tmp_path / "b.parquet", predictions=[tmp_path / "pred.parquet"])
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert batched.frame.equals(whole.frame)


_SUFFIXES = [".jsonl", ".csv", ".parquet", ".jsonl.gz", ".csv.gz", ".tsv"]


def _same_outcome(path: Path, options: ReadOptions, batch_bytes: int) -> None:
    """Both readers fail with one-line InputErrors, or give the same prompts."""
    try:
        whole, _ = read_prompts([path], options)
    except InputError:
        with pytest.raises(InputError) as batched:
            _streamed([path], options, batch_bytes=batch_bytes, rows=2)
        assert "\n" not in str(batched.value)
        return
    frame, _ = _streamed([path], options, batch_bytes=batch_bytes, rows=2)
    assert frame.select(COLUMNS).equals(whole.select(COLUMNS))


@settings(max_examples=int(__import__("os").environ.get("ASP_FUZZ_EXAMPLES", "120")), deadline=None)
@given(data=st.binary(max_size=400), suffix=st.sampled_from(_SUFFIXES), batch_bytes=st.integers(1, 64))
def test_random_bytes_fail_or_read_as_the_whole_file(tmp_path_factory, data, suffix, batch_bytes):
    path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
    path.write_bytes(gzip.compress(data, mtime=0) if suffix.endswith(".gz") and data[:1] == b"{" else data)
    for on_bad_row in ("error", "skip"):
        _same_outcome(path, ReadOptions(on_bad_row=on_bad_row), batch_bytes)


@settings(max_examples=int(__import__("os").environ.get("ASP_FUZZ_EXAMPLES", "120")), deadline=None)
@given(rows=st.lists(st.dictionaries(st.sampled_from(["prompt", "messages", "question", "id", "uid", "x",
                                                      "difficulty", "data_source", "level", "source"]),
                                     st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 5),
                                                            st.floats(allow_nan=False), st.text(max_size=6)),
                                                  lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                          st.dictionaries(st.sampled_from(
                                                                              ["role", "content", "text", "type"]),
                                                                              inner, max_size=3)),
                                                  max_leaves=8), max_size=5), min_size=1, max_size=12),
       suffix=st.sampled_from([".jsonl", ".parquet"]), batch_bytes=st.integers(1, 300))
def test_random_records_fail_or_read_as_the_whole_file(tmp_path_factory, rows, suffix, batch_bytes):
    path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
    if suffix == ".parquet":
        try:
            pl.DataFrame(rows).write_parquet(path, row_group_size=3)
        except Exception:  # noqa: BLE001 - rows Polars cannot hold in one frame: nothing to compare
            return
    else:
        write_jsonl(path, rows)
    for on_bad_row in ("error", "skip"):
        _same_outcome(path, ReadOptions(on_bad_row=on_bad_row), batch_bytes)


def test_the_depth_limit_holds_in_every_batch(tmp_path):
    from asp_cli import limits

    rows = _rows(60)
    lines = [json.dumps(r) for r in rows]
    deep = "[" * (limits.MAX_NESTING_DEPTH + 5) + "]" * (limits.MAX_NESTING_DEPTH + 5)
    lines[47] = '{"id": "deep", "prompt": [{"role": "user", "content": "x"}], "x": ' + deep + "}"
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole, batched = _errors([path], batch_bytes=300)
    assert batched == whole and f"{path}:48: JSON nested more than {limits.MAX_NESTING_DEPTH} levels" in batched
    frame, report = _assert_same([path], ReadOptions(on_bad_row="skip"), batch_bytes=300)
    assert report.skipped_examples == [f"{path}:48"] and frame.height == 59


def test_a_gzip_bomb_is_refused_while_inflating(tmp_path):
    from asp_cli import limits

    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"question": "q"}\n' + b" " * (limits.GZIP_FREE_BYTES + (8 << 20)), 9, mtime=0))
    whole, batched = _errors([path], batch_bytes=1 << 20)
    assert batched == whole and "inflates to more than" in batched


@pytest.mark.parametrize("batch_bytes", [128, 1 << 20])
def test_a_source_nested_in_an_object_is_read_and_streams_alike(tmp_path, batch_bytes):
    """slime keeps a row's data_source in `metadata` (verl in `extra_info`): it was missed ("the prompts carry no
    data_source"), and the history's per-source correction fell back to one global term. A top-level source
    column still wins; streamed batches read what the whole file reads."""
    rows = [{"messages": [{"role": "user", "content": f"q{i}"}],
             "metadata": {"uid": f"u{i}", "data_source": "aime" if i % 2 else "gsm8k"}} for i in range(12)]
    nested = write_jsonl(tmp_path / "nested.jsonl", rows)
    options = ReadOptions(id_key="metadata.uid")
    whole, _ = read_prompts([nested], options)
    assert whole[C.DATA_SOURCE].to_list() == ["gsm8k", "aime"] * 6
    _assert_same([nested], options, batch_bytes=batch_bytes)
    top = write_jsonl(tmp_path / "top.jsonl", [{**r, "data_source": "top"} for r in rows])
    assert set(read_prompts([top], options)[0][C.DATA_SOURCE].to_list()) == {"top"}


@pytest.mark.parametrize("batch_bytes", [128, 1 << 20])
def test_source_key_names_a_source_under_another_name(tmp_path, batch_bytes):
    """A newcomer's sources sat in `metadata.task` (or a `task` column), which no usual name finds: there was no way
    to name it, so the history's correction was one global term. --source-key names it, over a usual name too."""
    rows = [{"question": f"q{i}", "data_source": "all", "task": f"t{i % 3}",
             "metadata": {"task": "aime" if i % 2 else "gsm8k"}} for i in range(12)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    for key, expected in (("metadata.task", ["gsm8k", "aime"] * 6), ("task", [f"t{i % 3}" for i in range(12)])):
        options = ReadOptions(source_key=key)
        whole, report = read_prompts([path], options)
        assert whole[C.DATA_SOURCE].to_list() == expected
        assert report.columns_used[str(path)]["source"] == key
        _assert_same([path], options, batch_bytes=batch_bytes)
    assert "source" not in read_prompts([path])[1].columns_used[str(path)]  # as before where none is named
    with pytest.raises(InputError, match=r"p\.jsonl: no column 'kind' \(from --source-key\); columns are: question, "):
        read_prompts([path], ReadOptions(source_key="kind"))
    with pytest.raises(InputError, match=r"column 'metadata' \(from --source-key\) holds objects, not a name; name a "
                                         r"field inside them \(metadata.task\)"):
        read_prompts([path], ReadOptions(source_key="metadata"))  # it was read as no source, without a word
    with pytest.raises(SettingsError, match="--source-key must name a column"):
        ReadOptions(source_key="")


def test_an_object_or_list_among_source_names_names_no_source(tmp_path):
    """A source column of text with an object among it made a source named `{"x": 1}` (a hostile-input audit)."""
    path = tmp_path / "p.jsonl"
    path.write_text('{"question": "a", "task": "x"}\n{"question": "b", "task": {"y": 1}}\n'
                    '{"question": "c", "task": 5}\n{"question": "d", "task": [1]}\n')
    options = ReadOptions(source_key="task")
    assert read_prompts([path], options)[0][C.DATA_SOURCE].to_list() == ["x", None, "5", None]
    assert read_prompts_streamed([path], options)[0][C.DATA_SOURCE].to_list() == ["x", None, "5", None]


def test_openrlhfs_datasource_is_a_source(tmp_path):
    """OpenRLHF's PromptDataset reads `datasource`: a newcomer's OpenRLHF dataset probed as "(no source)"."""
    path = write_jsonl(tmp_path / "p.jsonl", [{"input": f"q{i}", "datasource": "lcb" if i % 2 else "gsm8k"}
                                              for i in range(6)])
    assert read_prompts([path])[0][C.DATA_SOURCE].to_list() == ["gsm8k", "lcb"] * 3


@pytest.mark.parametrize("batch_bytes", [1 << 16, 1 << 22])
def test_a_csv_column_whose_kind_changes_after_the_guessed_rows_is_read(tmp_path, batch_bytes):
    """Numbers in a column for 10,000 rows, then text: a valid file was refused as unreadable (whole and streamed)."""
    rows = ["id,question,src"] + [f"p{i},question {i},{i % 3}" for i in range(10_050)] + ["p10050,question,txt"]
    path = tmp_path / "big.csv"
    path.write_text("\n".join(rows) + "\n")
    options = ReadOptions(source_key="src")
    whole, _ = read_prompts([path], options)
    assert whole.height == 10_051 and whole[C.DATA_SOURCE][-1] == "txt" and whole[C.DATA_SOURCE][4] == "1"
    _assert_same([path], options, batch_bytes=batch_bytes)


@pytest.mark.parametrize("batch_bytes", [128, 1 << 20])
def test_difficulty_key_names_a_difficulty_under_another_name(tmp_path, batch_bytes):
    """A team's `meta.rating` could not be named: the history's per-difficulty correction never saw it."""
    rows = [{"question": f"q{i}", "level": 9, "meta": {"rating": f"Level {i % 4}", "x": 1}} for i in range(12)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    options = ReadOptions(difficulty_key="meta.rating")
    whole, report = read_prompts([path], options)
    assert whole[C.DIFFICULTY].to_list() == [float(i % 4) for i in range(12)]
    assert report.columns_used[str(path)]["difficulty"] == "meta.rating"
    _assert_same([path], options, batch_bytes=batch_bytes)
    assert read_prompts([path])[0][C.DIFFICULTY].to_list() == [9.0] * 12  # the usual name, where none is named
    with pytest.raises(InputError, match=r"column 'meta' \(from --difficulty-key\) holds Struct"):
        read_prompts([path], ReadOptions(difficulty_key="meta"))
    with pytest.raises(InputError, match=r"no column 'rank' \(from --difficulty-key\).*; name a column every input"):
        read_prompts([path], ReadOptions(difficulty_key="rank"))
    with pytest.raises(SettingsError, match="--difficulty-key must name a column"):
        ReadOptions(difficulty_key="")
    # Text without a number anywhere names no level: refused, naming the way to correct each value apart (an agent
    # newcomer's --difficulty-key agent_name was read as no difficulty at all, in silence).
    agents = write_jsonl(tmp_path / "a.jsonl", [{"question": f"q{i}", "agent_name": ["tool_agent", None][i % 2]}
                                                for i in range(6)])
    with pytest.raises(InputError, match=r"a\.jsonl: column 'agent_name' \(from --difficulty-key\) holds text "
                                         r"without a number \(e\.g\. 'tool_agent'\).*--source-key agent_name\)$"):
        read_prompts([agents], ReadOptions(difficulty_key="agent_name"))


def test_a_verl_export_of_several_epochs_without_ids_is_named_as_an_export(tmp_path):
    """verl's layout keeps the schedule's id in extra_info only: an export of two epochs of a dataset without ids was
    read with row numbers as ids, none repeated, and `asp schedule` planned every prompt once an epoch twice over,
    exit 0. Its metadata says it holds every epoch: it is named as an export, as one whose ids repeat is."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.export import export
    from asp_cli.settings import ScheduleSettings

    bare = write_jsonl(tmp_path / "bare.jsonl", [{"question": row["question"]} for row in make_prompts(16)])
    sched = tmp_path / "s.parquet"
    schedule([bare], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2, epochs=2))
    both, first = tmp_path / "v.parquet", tmp_path / "v0.parquet"
    export(sched, [bare], both, format="verl")
    export(sched, [bare], first, format="verl", epoch=0)
    _export_of_epochs_refused(both, first)


def test_an_export_of_several_epochs_under_a_metadata_key_without_ids_is_named_as_an_export(tmp_path):
    """--metadata-key keeps the schedule's id in that object: a JSON-lines export of two epochs of a dataset without
    ids was read with row numbers as ids, none repeated, and `asp schedule` planned every prompt once an epoch twice
    over, exit 0. JSON lines keep no metadata: its first row's epoch is not its last's. It is named as an export, as
    the Parquet one is (its metadata says it holds every epoch); one epoch's export is still read (`asp observe
    --dataset` reads the file the trainer was given)."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.export import export
    from asp_cli.settings import ScheduleSettings

    bare = write_jsonl(tmp_path / "bare.jsonl", [{"prompt": row["question"]} for row in make_prompts(16)])
    sched = tmp_path / "s.parquet"
    schedule([bare], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2, epochs=2))
    for name, fmt in (("e.jsonl", "jsonl"), ("e.parquet", "parquet")):
        both, first = tmp_path / name, tmp_path / f"one.{name}"
        export(sched, [bare], both, format=fmt, metadata_key="asp_meta")
        export(sched, [bare], first, format=fmt, metadata_key="asp_meta", epoch=0)
        _export_of_epochs_refused(both, first)
    # Training order ends in the last epoch too; a trailing blank line is no row.
    ordered = tmp_path / "train.jsonl"
    export(sched, [bare], ordered, format="jsonl", metadata_key="asp_meta", order="train")
    ordered.write_text(ordered.read_text() + "\n\n")
    with pytest.raises(InputError, match="its rows repeat each prompt, once an epoch"):
        read_prompts_streamed([ordered])


def _export_of_epochs_refused(both, first):
    """Both prompt readers name ``both``, an export of several epochs, as one; ``first``, one epoch's, is read."""
    said = (f"{both}: an asp export (its rows repeat each prompt, once an epoch), not the prompt file(s) the schedule "
            "was made from; give that file instead (each prompt once, in its own order)")
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError) as caught:
            read([both])
        assert str(caught.value) == said
        assert read([first])[0].height == 16  # one epoch's: each prompt once
