"""Hostile input: every reader against nesting depth, model files and presets against extreme numbers, archives
that inflate without bound, concurrent writers, output failures without an errno, and odd ids and paths.

Each test here would have found one class of issue 12 (docs/errors.md, "Hostile input"). Property tests use
the suite's deterministic Hypothesis profile (tests/conftest.py).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time
import signal
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from asp_cli import limits
from asp_cli.cli.main import app
from asp_cli.errors import InputError, OutputError, PredictorError, ScheduleFormatError, SettingsError
from asp_cli.reading import ReadOptions, read_lengths, read_prompts

from util import SAMPLE_PROMPTS, Paused, asp_command, make_prompts, write_jsonl

runner = CliRunner()
LIMIT = limits.MAX_NESTING_DEPTH
# Depths on both sides of the limit, and deep enough to crash PyArrow's parser (100,000) had it seen them.
DEPTHS = st.sampled_from([1, LIMIT - 1, LIMIT, LIMIT + 1, 2 * LIMIT, 1_000, 100_000])
fuzz = settings(max_examples=int(os.environ.get("ASP_FUZZ_EXAMPLES", "25")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def nested(depth: int, kind: str = "list") -> str:
    """JSON text nested ``depth`` levels deep (a value's own brackets count as its first level)."""
    if kind == "object":
        return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    if kind == "mixed":
        return "".join("[" if i % 2 else '{"a":' for i in range(depth - 1)) + "[]" + "".join(
            "]" if i % 2 else "}" for i in reversed(range(depth - 1)))
    return "[" * depth + "]" * depth


def line_with(field_depth: int, kind: str, in_string: bool) -> str:
    """A prompt row whose extra field nests ``field_depth`` levels (the row's object is one more)."""
    value = json.dumps(nested(field_depth, kind)) if in_string else nested(field_depth, kind)
    return f'{{"id": "deep", "question": "What is 2+2?", "extra": {value}}}'


def too_deep(field_depth: int, in_string: bool) -> bool:
    """Whether a JSON-lines row holding a field nested ``field_depth`` deep goes past the limit."""
    return not in_string and field_depth + 1 > LIMIT


# --------------------------------------------------------------------------------------------------------
# The scan itself: the same answer as a byte-by-byte reading, at any chunk and window size


def _reference(data: bytes, per_line: bool, limit: int) -> list[int]:
    out, depth, in_string, run, reported = [], 0, False, 0, False
    for i, b in enumerate(data):
        if b == 10:
            in_string, run = False, 0
            if per_line:
                depth, reported = 0, False
            continue
        if b == 92:
            run += 1
            continue
        odd, run = run % 2 == 1, 0
        if b == 34:
            in_string = in_string if odd else not in_string
        elif not in_string and b in (91, 123):
            depth += 1
            if depth == limit + 1 and not reported:
                out.append(i)
                reported = True
        elif not in_string and b in (93, 125):
            depth = max(0, depth - 1)
    return out if per_line else out[:1]


SCAN_BYTES = b'[]{}"\\\n a'  # every byte the scan treats specially, and two it does not


@given(data=st.binary(max_size=600).map(lambda b: bytes(SCAN_BYTES[x % len(SCAN_BYTES)] for x in b)),
       limit=st.integers(0, 12), chunk=st.sampled_from([1, 7, 64, 1 << 24]), window=st.sampled_from([8, 16, 512]),
       per_line=st.booleans())
@settings(max_examples=300, deadline=None)
def test_depth_scan_agrees_with_a_byte_by_byte_reading(data, limit, chunk, window, per_line):
    """Small chunks and windows exercise every carry between chunks (strings, escapes, depth)."""
    saved = limits._CHUNK_BYTES, limits._WINDOW_BYTES
    limits._CHUNK_BYTES, limits._WINDOW_BYTES = chunk, window
    try:
        got = limits.json_depth_violations(data, per_line=per_line, limit=limit, first_only=False)
    finally:
        limits._CHUNK_BYTES, limits._WINDOW_BYTES = saved
    assert got == _reference(data, per_line, limit)


def test_brackets_inside_strings_and_escapes_do_not_count():
    text = json.dumps({"q": "[" * 5000 + '\\"' + "{" * 5000, "r": ['"[[['] * 3}).encode()
    assert limits.json_depth_violations(text, per_line=True) == []
    assert limits.json_depth_violations(b"[" * (LIMIT + 1), per_line=False) == [LIMIT]


# --------------------------------------------------------------------------------------------------------
# Nesting depth through every reader


@given(depth=DEPTHS, kind=st.sampled_from(["list", "object", "mixed"]), in_string=st.booleans(),
       line=st.integers(0, 2), skip=st.booleans())
@fuzz
def test_prompt_files_refuse_deep_nesting_cleanly(tmp_path_factory, depth, kind, in_string, line, skip):
    rows = [json.dumps({"id": f"r{i}", "question": f"q{i}"}) for i in range(3)]
    rows.insert(line, line_with(depth, kind, in_string))
    folder = tmp_path_factory.mktemp("deep")
    jsonl = folder / "p.jsonl"
    jsonl.write_text("\n".join(rows) + "\n")
    array = folder / "p.json"
    array.write_text("[" + ",\n".join(rows) + "]")
    gz = folder / "p.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl.read_bytes()))
    for path in (jsonl, array, gz):
        # In a .json array every row is one level deeper; a whole array is one document (no skipping).
        deep = not in_string and depth + (2 if path.suffix == ".json" else 1) > LIMIT
        mode = "skip" if skip and path.suffix != ".json" else "error"
        try:
            frame, report = read_prompts([path], ReadOptions(on_bad_row=mode))
        except InputError as exc:
            assert deep and mode == "error", exc
            assert f"{path}:{line + 1}: JSON nested more than {LIMIT} levels deep" in str(exc)
            assert "\n" not in str(exc)
        else:
            assert not deep or mode == "skip"
            assert frame.height == (3 if deep else 4) and report.skipped_rows == (1 if deep else 0)


@given(depth=DEPTHS, in_string=st.booleans())
@fuzz
def test_length_files_refuse_deep_nesting_cleanly(tmp_path_factory, depth, in_string):
    """--history, --predictions, --lengths and asp observe logs all read through the same tables reader."""
    from asp_cli.predict.predictions_file import predictions_from_files

    folder = tmp_path_factory.mktemp("deep")
    value = json.dumps(nested(depth)) if in_string else nested(depth)
    path = folder / "h.jsonl"
    path.write_text('{"prompt_id": "a", "response_tokens": 5, "predicted_tokens": 5, "x": ' + value + "}\n")
    prompts, _ = read_prompts([write_jsonl(folder / "p.jsonl", [{"id": "a", "question": "q"}])])
    deep = too_deep(depth, in_string)
    for call in (lambda: read_lengths([path]),
                 lambda: predictions_from_files(prompts, [path], fingerprint="x", max_response_tokens=100)):
        try:
            call()
        except InputError as exc:
            assert deep and f"nested more than {LIMIT} levels deep" in str(exc), exc
        else:
            assert not deep


def test_observe_refuses_a_deep_log_with_exit_3(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"prompt_id": "a", "response_tokens": 5, "x": ' + nested(100_000) + "}\n")
    result = runner.invoke(app, ["observe", str(log), "-o", str(tmp_path / "h.parquet")])
    assert result.exit_code == 3 and f"log.jsonl:1: JSON nested more than {LIMIT} levels deep" in result.stderr


@given(depth=DEPTHS)
@fuzz
def test_json_text_in_cells_is_checked_before_parsing(tmp_path_factory, depth):
    """A chat list stored as JSON text in a CSV or Parquet cell goes to Polars' and Python's JSON parsers."""
    folder = tmp_path_factory.mktemp("deep")
    cell = '[{"role": "user", "content": "hi", "x": ' + nested(depth) + "}]"
    frame = pl.DataFrame({"id": ["a", "b"], "messages": ['[{"role": "user", "content": "fine"}]', cell]})
    deep = depth + 2 > LIMIT  # the list and its message object, then the field
    for path in (folder / "p.csv", folder / "p.parquet"):
        frame.write_csv(path) if path.suffix == ".csv" else frame.write_parquet(path)
        try:
            prompts, _ = read_prompts([path])
        except InputError as exc:
            assert deep and f"nested more than {LIMIT} levels deep" in str(exc), exc
        else:
            assert not deep and prompts.height == 2
        skipped, report = read_prompts([path], ReadOptions(on_bad_row="skip"))
        assert skipped.height == (1 if deep else 2)


@pytest.mark.parametrize("depth", [40, 60, LIMIT + 1, 800])
def test_parquet_columns_nested_too_deep_are_refused_from_the_footer(tmp_path, depth):
    """Polars' Parquet reader crashes (SIGSEGV) at about 800 levels: the footer is checked first (PyArrow
    itself reads at most 100 Parquet schema levels, about 50 lists; asp's own limit is 100 levels)."""
    from asp_cli.integrate.observe import read_history

    arrow_type, value = pa.int64(), 1
    for _ in range(depth):
        arrow_type, value = pa.list_(arrow_type), [value]
    table = pa.table({"prompt_id": ["a"], "response_tokens": [5], "question": ["q"],
                      "m": pa.array([value], type=arrow_type)})
    path = tmp_path / "deep.parquet"
    pq.write_table(table, path)
    for call in (lambda: read_prompts([path]), lambda: read_lengths([path]),
                 *([lambda: read_history(path)] if depth > 50 else [])):
        if depth > 50:
            with pytest.raises(InputError, match=f"{path}: (a column|column 'm') is nested more than {LIMIT} levels"):
                call()
        else:
            call()
    if depth <= 50:  # read for an append, its other columns would be dropped: refused (tests/test_history_file.py)
        with pytest.raises(InputError, match=r"holds columns an asp history does not \(question, m\)"):
            read_history(path)


@pytest.mark.parametrize("depth", [LIMIT - 1, LIMIT + 1, 100_000])
def test_schedule_metadata_preset_and_history_metadata_depth(tmp_path, depth):
    from asp_cli.costmodel import load_preset
    from asp_cli.integrate.observe import METADATA_KEY as HISTORY_KEY
    from asp_cli.integrate.observe import read_history
    from asp_cli.schedule_format import METADATA_KEY, read_schedule

    deep = depth + 1 > LIMIT
    schedule = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(schedule)]).exit_code == 0
    table = pq.read_table(schedule)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    text = json.dumps(meta)[:-1] + ', "extra": ' + nested(depth) + "}"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: text.encode()}), schedule)
    preset = tmp_path / "cal.json"
    preset.write_text('{"eta_bandwidth": 0.8, "description": "x", "name": "n", "base": "h100-qwen2.5-7b"}'[:-1]
                      + ', "zz": ' + nested(depth) + "}")
    history = tmp_path / "h.parquet"
    pq.write_table(pa.table({"prompt_id": ["a"], "response_tokens": [5]}).replace_schema_metadata(
        {HISTORY_KEY: ('{"logs": [], "extra": ' + nested(depth) + "}").encode()}), history)
    for call, error in ((lambda: read_schedule(schedule), ScheduleFormatError),
                        (lambda: read_history(history), InputError)):
        if deep:
            with pytest.raises(error, match=f"nested more than {LIMIT} levels deep"):
                call()
        else:
            call()
    # A preset field asp does not know is refused too, but only after the depth check.
    words = f"nested more than {LIMIT} levels deep" if deep else "unknown preset field 'zz'"
    with pytest.raises(SettingsError, match=words):
        load_preset(preset)
    result = runner.invoke(app, ["report", str(schedule)])
    assert result.exit_code == (6 if deep else 0), result.stderr


def test_model_json_members_are_checked_for_depth(tmp_path):
    from asp_cli.predict import model as P
    from asp_cli.predict.prediction import DEFAULT_MODEL

    card, schema = tmp_path / "card.skops", tmp_path / "schema.skops"
    with zipfile.ZipFile(DEFAULT_MODEL) as src:
        members = {name: src.read(name) for name in src.namelist()}
    for path, name, data in ((card, P.META_MEMBER, ('{"format_version": 1, "x": ' + nested(100_000) + "}").encode()),
                             (schema, P.SCHEMA_MEMBER, nested(100_000).encode())):
        with zipfile.ZipFile(path, "w") as dst:
            for member, content in members.items():
                dst.writestr(member, data if member == name else content)
        with pytest.raises(PredictorError, match=f"nested more than {LIMIT} levels deep"):
            P.load(path)
        result = runner.invoke(app, ["predictor", "info", str(path)])
        assert result.exit_code == 5 and result.stderr.startswith(f"Error: {path}")


# --------------------------------------------------------------------------------------------------------
# Poisoned and absurd model files and presets


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    from _predictor_data import make_data
    from asp_cli.predict import model as P

    prompts, lengths = make_data()
    return P.LengthPredictor(min_df=1, char_ngrams=True).fit(prompts, lengths), prompts


EXTREMES = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 2e6, -2e6])
ARRAYS = ["word_coef_", "fill_", "knots_", "center_", "scale_", "head_coef_", "char_coef_"]
SCALARS = ["word_intercept_", "head_intercept_", "char_intercept_", "log_spread_"]


@given(name=st.sampled_from(ARRAYS + SCALARS), value=EXTREMES, index=st.integers(0, 10_000))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_poisoned_numbers_in_a_model_file_are_refused(tmp_path_factory, small_model, name, value, index):
    import copy

    from asp_cli.predict import model as P

    model, prompts = small_model
    poisoned = copy.deepcopy(model)
    if name in ARRAYS:
        array = getattr(poisoned, name).copy()
        array.flat[index % array.size] = value
        setattr(poisoned, name, array)
    else:
        setattr(poisoned, name, value)
    path = tmp_path_factory.mktemp("poison") / "m.skops"
    P.save(poisoned, path)
    try:
        loaded = P.load(path)
    except PredictorError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: the model file is damaged") and f"'{name[:-1]}'" in message, message
        assert "\n" not in message
    else:
        # Only a value inside the documented bounds loads, and then predictions stay finite.
        bound = P.MAX_ABS_FEATURE if name in ("fill_", "knots_", "center_", "scale_") else P.MAX_ABS_WEIGHT
        assert np.isfinite(value) and abs(value) <= bound and name != "log_spread_"
        assert np.isfinite(loaded.predict_log(prompts)[0]).all()


def test_a_model_with_nan_weights_is_exit_5_naming_the_file(tmp_path, small_model):
    """Was: predictor predict exit 0 with -9.2e18 tokens, and schedule exit 6 blaming the schedule."""
    import copy

    from asp_cli.predict import model as P

    model, prompts = small_model
    poisoned = copy.deepcopy(model)
    poisoned.head_coef_ = np.full_like(model.head_coef_, np.nan)
    path = tmp_path / "nan.skops"
    P.save(poisoned, path)
    prompt_file = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "q"}, {"id": "b", "question": "r"}])
    for command in (["predictor", "predict", str(prompt_file), "-o", str(tmp_path / "p.parquet"), "--model", str(path)],
                    ["schedule", str(prompt_file), "-o", str(tmp_path / "s.parquet"), "--predictor", str(path)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 5, result.stderr
        assert result.stderr.startswith(f"Error: {path}: the model file is damaged") and "head_coef" in result.stderr
    assert not (tmp_path / "p.parquet").exists() and not (tmp_path / "s.parquet").exists()


def _with_card(tmp_path, model, edit):
    """``model`` saved with its card (the model file's metadata member) changed by ``edit``, as a hand would."""
    from asp_cli.predict import model as P

    path = tmp_path / "m.skops"
    P.save(model, path)
    with zipfile.ZipFile(path) as src:
        members = {name: src.read(name) for name in src.namelist()}
    card = json.loads(members[P.META_MEMBER])
    edit(card)
    members[P.META_MEMBER] = json.dumps(card).encode()
    with zipfile.ZipFile(path, "w") as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    return path


def test_a_model_whose_card_disagrees_with_its_arrays_is_refused(tmp_path, small_model):
    from asp_cli.predict import model as P

    path = _with_card(tmp_path, small_model[0], lambda card: card.update(vocabulary_size=card["vocabulary_size"] + 1))
    with pytest.raises(PredictorError, match="vocabulary_size"):
        P.load(path)


@pytest.mark.parametrize("bounds", [[-5.0, -4.0], [30.0, 31.0]])
def test_a_model_whose_log_mean_range_is_outside_what_it_saw_is_refused(tmp_path, small_model, bounds):
    """A hostile-input round: a hand-edited range put every prompt at 1 token, or every one at the cap, exit 0."""
    from asp_cli.predict import model as P

    path = _with_card(tmp_path, small_model[0], lambda card: card["training"].update(log_mean_range=bounds))
    with pytest.raises(PredictorError, match="log_mean_range"):
        P.load(path)


def test_predictor_info_escapes_a_model_file_s_own_text(tmp_path, small_model):
    """A hostile-input round: the card's evaluation text, an OSC sequence, reached the terminal raw."""
    path = _with_card(tmp_path, small_model[0], lambda card: card.update(evaluation={"x": "\x1b]0;title\x07"}))
    result = runner.invoke(app, ["predictor", "info", str(path)])
    assert result.exit_code == 0 and "\x1b" not in result.stderr and "evaluation: x \\x1b]0;title\\x07" in result.stderr


@pytest.mark.parametrize("features", [None, 5, "text_score"])
def test_a_card_whose_features_are_not_a_list_is_a_damaged_model(tmp_path, small_model, features):
    """A hostile-input round (2026-12-07): a card's `features` set to null was an internal error (TypeError, exit 70)
    in every command that loads a model, though the state holds its own list."""
    path = _with_card(tmp_path, small_model[0], lambda card: card.update(features=features))
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "q"}])
    result = runner.invoke(app, ["predictor", "predict", str(prompts), "-o", str(tmp_path / "o.parquet"),
                                 "--model", str(path)])
    assert result.exit_code == 5, result.output
    assert result.stderr.startswith(f"Error: {path}: the model file is damaged") and "'features'" in result.stderr
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("evaluation", ["\x1b[31m[/x]", [1, 2], 5])
def test_predictor_info_shows_an_evaluation_that_is_not_an_object(tmp_path, small_model, evaluation):
    """The card's evaluation hand-edited into text or a list: `asp predictor info` was exit 70 (AttributeError)."""
    path = _with_card(tmp_path, small_model[0], lambda card: card.update(evaluation=evaluation))
    result = runner.invoke(app, ["predictor", "info", str(path)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stderr and "  evaluation: " in result.stderr


PRESET_FIELDS = ["weights_bytes", "params", "kv_bytes_per_token", "bandwidth_bytes_per_s", "eta_bandwidth",
                 "flops_per_s", "eta_flops", "hbm_bytes", "gpu_memory_utilization", "activation_reserve_bytes",
                 "step_overhead_s", "max_num_seqs", "train_fixed_s", "train_per_token_s", "weight_sync_s"]


@given(field=st.sampled_from(PRESET_FIELDS),
       value=st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1", "1e300", "0", "1.5", "true", '"7"',
                              "10000000000000000000000000000000000000000"]))
@example(field="bandwidth_bytes_per_s", value="1.5")  # a decode cost of 1.3e10 s: named only "the bandwidth" before
@fuzz
def test_absurd_preset_numbers_are_exit_4_naming_file_and_field(tmp_path_factory, field, value):
    from asp_cli.costmodel import load_preset

    path = tmp_path_factory.mktemp("preset") / "cal.json"
    path.write_text(f'{{"{field}": {value}}}')
    try:
        preset = load_preset(path)
    except SettingsError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
        assert f"field {field!r}" in str(exc) or "KV cache" in str(exc) or "fields " in str(exc) and repr(field) in str(exc), exc
    else:
        # Accepted: a number inside the field's documented range, giving finite costs and some KV cache.
        assert value in ("0", "1.5") and np.isfinite(float(preset.step_seconds(256, 256 * 1024)))
        assert preset.kv_capacity_tokens >= 1 and float(getattr(preset, field)) == float(value)


def test_a_nan_preset_is_exit_4_not_6(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text('{"eta_bandwidth": NaN}')
    result = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "s.parquet"), "--preset",
                                 str(path)])
    assert result.exit_code == 4 and "cal.json: field 'eta_bandwidth' must be a finite number" in result.stderr


# --------------------------------------------------------------------------------------------------------
# Archives that inflate without bound


def _deflated_zeros(blocks: int) -> bytes:
    """A raw deflate stream of ``blocks`` x 4 MiB of zeros, built in milliseconds: one block compressed and
    ended with a full flush (byte-aligned, dictionary reset) repeats as itself, then an empty final block."""
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = compressor.compress(b"\0" * (1 << 22)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return segment * blocks + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


def _bomb(path: Path, blocks: int) -> int:
    """A model file whose schema member truly inflates to ``blocks`` x 4 MiB of zeros (about 1,000 to 1).

    Written by hand (zipfile cannot store data compressed elsewhere); the CRC is not that of the data, which
    only a reader that inflated the whole member would find out. Returns the inflated size.
    """
    import struct

    size = blocks << 22
    data = _deflated_zeros(blocks)
    card = json.dumps({"format_version": 1}).encode()
    out = bytearray()
    directory = bytearray()
    for name, body, method, usize in ((b"asp_meta.json", card, 0, len(card)), (b"schema.json", data, 8, size)):
        crc = zipfile.crc32(body) if method == 0 else 0
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(body), usize, len(name), 0)
        out += name + body
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(body), usize,
                                 len(name), 0, 0, 0, 0, 0, offset) + name
    out += directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(directory), len(out), 0)
    path.write_bytes(bytes(out))
    return size


def test_a_zip_bomb_is_refused_before_anything_inflates(tmp_path, monkeypatch):
    """A 3 MB file that inflates to 3 GB: refused from the central directory, reading no member."""
    from asp_cli.predict import model as P

    path = tmp_path / "bomb.skops"
    assert _bomb(path, 768) == 3 * 2**30
    assert path.stat().st_size < 4_000_000
    opened: list[str] = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: (opened.append(str(name)),
                                                                                real_open(self, name, *a, **k))[1])
    tracemalloc.start()
    try:
        with pytest.raises(PredictorError, match="member 'schema.json' inflates to 3,221,225,472 bytes"):
            P.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert opened == [] and peak < 8 * 2**20  # the file itself (3 MB) is the most held
    result = runner.invoke(app, ["predictor", "info", str(path)])
    assert result.exit_code == 5 and "inflates to" in result.stderr


def test_a_gzip_bomb_is_refused_while_inflating(tmp_path):
    """Prompt files may be .gz: inflating stops at 200x the compressed size (beyond the first 16 MiB)."""
    path = tmp_path / "bomb.jsonl.gz"
    header, trailer = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff", b"\x00" * 8  # 3 GiB of zeros in 3 MB
    path.write_bytes(header + _deflated_zeros(768) + trailer)
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="decompression bomb"):
            read_prompts([path])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Stopped a little past the free 16 MiB (with the 3 MB file held), not after 3 GiB.
    assert peak < limits.GZIP_FREE_BYTES + 4 * path.stat().st_size + 16 * 2**20 < 64 * 2**20


def test_ordinary_gzip_input_still_reads(tmp_path):
    path = tmp_path / "p.jsonl.gz"
    path.write_bytes(gzip.compress(SAMPLE_PROMPTS.read_bytes()))
    assert read_prompts([path])[0].height == 3540


# --------------------------------------------------------------------------------------------------------
# Two writers on one output, synchronised by pause points (no timing)


def test_two_schedules_to_one_new_path_cannot_both_win(tmp_path):
    out = tmp_path / "s.parquet"
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "question": "q " * i} for i in range(40)])
    first = Paused(asp_command("schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--quiet"), "publish")
    assert first.reached  # its schedule is complete, about to be put in place
    second = runner.invoke(app, ["schedule", str(prompts), "-o", str(out), "--quiet"])
    assert second.exit_code == 0, second.stderr  # the second run wins the race
    first.resume()
    code, _, stderr = first.wait()
    assert code == 7 and stderr == f"Error: {out} exists (written while this ran); pass --force to replace it\n"
    from asp_cli.schedule_format import read_schedule

    assert read_schedule(out).frame.height == 40  # the winner's file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "s.parquet"]


def test_with_force_the_last_writer_wins(tmp_path):
    out = tmp_path / "s.parquet"
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "question": "q " * i} for i in range(40)])
    first = Paused(asp_command("schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--quiet", "--force"), "publish")
    assert first.reached
    assert runner.invoke(app, ["schedule", str(prompts), "-o", str(out), "--quiet"]).exit_code == 0
    first.resume()
    assert first.wait()[0] == 0
    from asp_cli.schedule_format import read_schedule

    assert read_schedule(out).frame.height == 3540


def test_two_appends_into_one_history_keep_both_logs(tmp_path):
    """Was: both exit 0 and one log's rows are gone. The first appender holds the lock with the history
    read; the second reaches the lock and waits; the first writes; the second reads that and adds its own."""
    history = tmp_path / "h.parquet"
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"prompt_id": "s", "response_tokens": 1}])
    assert runner.invoke(app, ["observe", str(seed), "-o", str(history)]).exit_code == 0
    logs = [write_jsonl(tmp_path / f"log{i}.jsonl", [{"prompt_id": f"p{i}", "response_tokens": 10 + i}] * 3)
            for i in (1, 2)]
    first = Paused(asp_command("observe", str(logs[0]), "-o", str(history), "--append", "--quiet"), "locked")
    assert first.reached
    second = Paused(asp_command("observe", str(logs[1]), "-o", str(history), "--append", "--quiet"), "lock-wait")
    assert second.reached
    second.resume()  # it now waits for the lock the first holds
    first.resume()
    assert first.wait()[0] == 0 and second.wait()[0] == 0
    from asp_cli.integrate.observe import read_history

    frame, ingested = read_history(history)
    assert sorted(frame["prompt_id"].to_list()) == ["p1"] * 3 + ["p2"] * 3 + ["s"]
    assert [entry["name"] for entry in ingested] == ["seed.jsonl", "log1.jsonl", "log2.jsonl"]
    assert not list(tmp_path.glob(".*asp-lock"))  # the holder removes it (one was left beside every history)


def test_an_append_to_a_new_history_another_run_wrote_meanwhile_is_told_to_append_again(tmp_path):
    """`asp observe --append` to a history not yet there, which a plain `asp observe` wrote while the appender read
    its logs: the appender is refused (nothing lost), and was told to pass --force, which would replace the other
    run's rows (a hostile-input round, 2026-12-07); it is told to append again."""
    history = tmp_path / "h.parquet"
    logs = [write_jsonl(tmp_path / f"log{i}.jsonl", [{"prompt_id": f"p{i}", "response_tokens": 10 + i}] * 3)
            for i in (1, 2)]
    appender = Paused(asp_command("observe", str(logs[0]), "-o", str(history), "--append", "--quiet"), "publish")
    assert appender.reached
    assert runner.invoke(app, ["observe", str(logs[1]), "-o", str(history), "-q"]).exit_code == 0
    appender.resume()
    code, _, stderr = appender.wait()
    assert code == 7, stderr
    assert stderr.strip().endswith("run this again with --append to add these logs to it (--force would replace "
                                   "its rows)") and "pass --force" not in stderr
    assert runner.invoke(app, ["observe", str(logs[0]), "-o", str(history), "--append", "-q"]).exit_code == 0
    from asp_cli.integrate.observe import read_history

    assert sorted(read_history(history)[0]["prompt_id"].to_list()) == ["p1"] * 3 + ["p2"] * 3


def test_a_lock_whose_file_was_removed_or_replaced_is_taken_again_on_the_files_new_lock(tmp_path):
    """The waiter that gets the lock of a removed lock file must not run beside a third run that locked the file
    made anew at that name: it lets go and locks the name's current file."""
    import fcntl
    import threading

    from asp_cli import output

    target = tmp_path / "h.parquet"
    lock = output._lock_path(target)
    first = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(first, fcntl.LOCK_EX)
    order: list[str] = []

    def waiter() -> None:
        with output.locked(target):
            order.append("waiter in")
            order.append("waiter out")

    thread = threading.Thread(target=waiter, daemon=True)  # a failed test must not hang the run
    thread.start()
    time.sleep(0.3)  # the waiter polls the first file's lock
    os.unlink(lock)  # the holder removes the name, then a third run makes and locks a new file there
    third = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(third, fcntl.LOCK_EX)
    os.close(first)  # the old file's lock is free now: the waiter must see it is no longer the name's
    time.sleep(0.3)
    order.append("third still holds")
    os.unlink(lock)
    os.close(third)
    thread.join(timeout=10)
    assert order == ["third still holds", "waiter in", "waiter out"] and not lock.exists()


def test_sigkill_before_and_after_publishing_leaves_old_or_new(tmp_path):
    """The moments that matter, hit exactly: the new file complete but not in place, and just in place."""
    from asp_cli.output import TMP_MARKER
    from asp_cli.schedule_format import read_schedule

    out = tmp_path / "s.parquet"
    for point, expect_new in (("publish", False), ("published", True)):
        out.write_bytes(b"previous")
        child = Paused(asp_command("schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--force", "--quiet"), point)
        assert child.reached
        child.signal(signal.SIGKILL)
        assert child.wait()[0] == -signal.SIGKILL
        if expect_new:
            assert read_schedule(out).frame.height == 3540
        else:
            assert out.read_bytes() == b"previous"
        leftovers = [p.name for p in tmp_path.iterdir() if TMP_MARKER in p.name]
        assert all(name.startswith(".s.parquet" + TMP_MARKER) for name in leftovers)
        for name in leftovers:
            (tmp_path / name).unlink()


# --------------------------------------------------------------------------------------------------------
# Output failures without an errno, and a full stdout


def _polars_full_disk(*args, **kwargs):
    raise OSError("No space left on device (os error 28)")  # what Polars raises: no errno


def _polars_compute_error(*args, **kwargs):
    raise pl.exceptions.ComputeError("parquet: File out of specification: underlying IO error: No space left on "
                                     "device (os error 28)")


@pytest.mark.parametrize("raiser", [_polars_full_disk, _polars_compute_error])
def test_write_failures_without_an_errno_are_exit_7(tmp_path, monkeypatch, raiser):
    schedule = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(schedule)]).exit_code == 0
    monkeypatch.setattr(pl.DataFrame, "write_ndjson", raiser)
    monkeypatch.setattr(pl.DataFrame, "write_parquet", raiser)
    for command, out in ((["export", str(schedule), str(SAMPLE_PROMPTS), "--format", "jsonl"], "e.jsonl"),
                         (["predictor", "predict", str(SAMPLE_PROMPTS)], "x.parquet")):
        result = runner.invoke(app, [*command, "-o", str(tmp_path / out)])
        assert result.exit_code == 7, result.stderr
        assert result.stderr.startswith(f"Error: cannot write {tmp_path / out} (") and "No space left" in result.stderr
        assert not (tmp_path / out).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_stdout_is_exit_7(tmp_path):
    import subprocess

    schedule = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(schedule)]).exit_code == 0
    for args in (["report", str(schedule), "--json"], ["report", str(schedule)]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(asp_command(*args), stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
        assert done.returncode == 7, done.stderr
        assert done.stderr == "Error: cannot write to stdout (No space left on device); free space where it goes, " \
                              "or send it elsewhere\n"
    # Click's own output (help, version) went as a traceback (exit 1); a schedule written before its --json
    # summary failed was not said to be there.
    for args in (["--help"], ["--version"], ["schedule", "--help"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(asp_command(*args), stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
        assert done.returncode == 7 and done.stderr.startswith("Error: cannot write to stdout"), (args, done.stderr)
    with open("/dev/full", "w") as full:
        done = subprocess.run(asp_command("schedule", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "t.parquet"), "--json",
                                          "-q"), stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 7 and f"({tmp_path / 't.parquet'} written in full)" in done.stderr, done.stderr


def test_a_closed_standard_stream_is_not_a_bug(tmp_path):
    """A job started with a standard stream closed (`>&-`, `2>&-`, `<&-`; a daemon or a scheduler's prolog): a
    closed stderr made every command exit 70, 'internal error' (sys.stderr is None; a Slurm user's round), said
    nowhere; a closed stdout made `--json` exit 70 too, where a stdout that cannot take the document is exit 7
    (E52). The streams are opened on /dev/null, so that no output file takes their descriptors either."""
    import subprocess

    write_jsonl(tmp_path / "p.jsonl", make_prompts(30))
    schedule = tmp_path / "s.parquet"
    quiet = ("--instances", "1", "--train-batch-size", "10")  # no warning on stderr

    def run(stream: int, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(asp_command(*args), stdout=subprocess.PIPE if stream != 1 else None,
                              stderr=subprocess.PIPE if stream != 2 else None, text=True, timeout=300,
                              preexec_fn=lambda: os.close(stream))

    for stream in (0, 2):
        schedule.unlink(missing_ok=True)
        done = run(stream, "schedule", str(tmp_path / "p.jsonl"), "-o", str(schedule), "--json", *quiet)
        assert done.returncode == 0, (stream, done.stderr)
        assert json.loads(done.stdout)["prompts"] == 30 and schedule.is_file()
    done = run(2, "report", str(schedule), "--check", "--max-padding", "0")
    assert done.returncode == 1 and done.stdout.startswith("asp report: ")
    done = run(1, "schedule", str(tmp_path / "p.jsonl"), "-o", str(schedule), "--force", "--quiet", *quiet)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    for args in (["report", str(schedule), "--json"], ["report", str(schedule)], ["--version"]):
        done = run(1, *args)
        assert done.returncode == 7, (args, done.stderr)
        assert done.stderr == "Error: cannot write to stdout (it is closed); send it to a file or /dev/null\n"
    done = run(1, "schedule", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "t.parquet"), "--json", "-q", *quiet)
    assert done.returncode == 7 and done.stderr == (f"Error: cannot write to stdout (it is closed) ({tmp_path / 't.parquet'} "
                                                    "written in full); send it to a file or /dev/null\n"), done.stderr


def test_a_stdout_whose_reader_stopped_is_not_told_to_free_space(tmp_path):
    """`asp report s.parquet --json | head -c 100`: the pipe's reader gone, writing failed with EPIPE, and E52 said
    "cannot write to stdout (Broken pipe); free space where it goes", a disk's fix. It names the reader."""
    import subprocess

    write_jsonl(tmp_path / "p.jsonl", make_prompts(30))
    schedule = tmp_path / "s.parquet"
    # A train batch that divides the 30 prompts: the report then warns of nothing, and stderr holds the error alone.
    made = subprocess.run(asp_command("schedule", str(tmp_path / "p.jsonl"), "-o", str(schedule), "--quiet",
                                      "--train-batch-size", "10"), capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(asp_command("report", str(schedule), "--json"), stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(write)
    assert done.returncode == 7, done.stderr
    assert done.stderr == ("Error: cannot write to stdout (Broken pipe); the program it was piped to stopped reading "
                           "before the end (head?): let it read all, or send it to a file\n"), done.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/proc/mounts").exists(), reason="a real full disk needs root")
def test_a_real_full_disk_is_exit_7(tmp_path):
    """A 1 MiB tmpfs, really full (skipped where mounting is not allowed)."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        schedule = tmp_path / "s.parquet"
        assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(schedule)]).exit_code == 0
        for command in (["export", str(schedule), str(SAMPLE_PROMPTS), "--format", "jsonl", "-o", str(disk / "e.jsonl")],
                        ["predictor", "predict", str(SAMPLE_PROMPTS), "-o", str(disk / "x.parquet")]):
            result = runner.invoke(app, command)
            assert result.exit_code == 7 and "No space left" in result.stderr, result.stderr
            assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# --------------------------------------------------------------------------------------------------------
# Smaller: ids, paths, versions, missing logs, byte-identical model files


@pytest.mark.parametrize("value, words", [
    ({"x": 1}, "is a JSON object"), ([1], "is a list"), (1.5, "is the number 1.5, not an integer"),
    (True, "is true or false"), (float("nan"), "is NaN"), (123456789012345678901234567890, r"is the (integer|number) 1[0-9.e+]*, too large"),
])
def test_ids_must_be_text_or_integers(tmp_path, value, words):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "ok", "question": "a"}) + "\n" + json.dumps({"id": value, "question": "b"}) + "\n")
    other = tmp_path / "q.jsonl"
    other.write_text(json.dumps({"id": value, "question": "a"}) + "\n" + json.dumps({"id": value, "question": "b"})
                     + "\n")
    for source, line in ((path, 2), (other, 1)):
        with pytest.raises(InputError, match=f"{source.name}:{line}: column 'id' \\(the id\\) {words}") as caught:
            read_prompts([source])
        assert "ids are text or integers" in str(caught.value)
    assert read_prompts([path], ReadOptions(on_bad_row="skip"))[0]["prompt_id"].to_list() == ["ok"]


@pytest.mark.parametrize("value", ["", " ", "\t", "\u3000"])
def test_a_blank_id_is_refused_naming_its_row(tmp_path, value):
    """An audit: an empty id (or one of blanks only) was accepted, where it names no prompt reliably across files
    (a CSV tool trims or drops it, a log writes it as missing). Refused by the one id check (E53), in prompt files
    of every kind and in length files; skipped as a bad row with --on-bad-row skip."""
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(json.dumps({"id": "ok", "question": "a"}) + "\n" + json.dumps({"id": value, "question": "b"})
                     + "\n")
    csv = tmp_path / "p.csv"
    csv.write_text(f'id,question\nok,a\n"{value}",b\n', encoding="utf-8")
    parquet = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": ["ok", value], "question": ["a", "b"]}), parquet)
    mixed = tmp_path / "m.jsonl"  # a column of mixed kinds: the reader's text, untagged
    mixed.write_text(json.dumps({"id": 7, "question": "a"}) + "\n" + json.dumps({"id": value, "question": "b"})
                     + "\n")
    places = {jsonl: "p.jsonl:2", csv: "p.csv: row 2 (after the header)", parquet: "p.parquet: row 2",
              mixed: "m.jsonl:2"}
    for source, where in places.items():
        with pytest.raises(InputError) as caught:
            read_prompts([source])
        assert str(caught.value).endswith(
            f"{where}: column 'id' (the id) is blank (empty, or only spaces), which names no prompt reliably across "
            "files; give the row an id, name another column with --id-key, or pass --on-bad-row skip to skip bad "
            "rows"), str(caught.value)
        kept = read_prompts([source], ReadOptions(on_bad_row="skip"))[0]["prompt_id"].to_list()
        assert kept == (["7"] if source == mixed else ["ok"])
    history = tmp_path / "h.jsonl"
    history.write_text(json.dumps({"prompt_id": value, "response_tokens": 5}) + "\n")
    with pytest.raises(InputError, match=r"h.jsonl:1: column 'prompt_id' \(the id\) is blank"):
        read_lengths([history])


def test_integer_ids_in_every_form_stay_ids(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 3.0, "question": "a"}\n{"id": 4, "question": "b"}\n{"id": "x", "question": "c"}\n'
                    '{"id": 9007199254740993, "question": "d"}\n')
    assert read_prompts([path])[0]["prompt_id"].to_list() == ["3", "4", "x", "9007199254740993"]


def test_an_integer_id_beyond_2_53_beside_fractions_stays_exact(tmp_path):
    """An audit: JSON integer ids beside float ids made one column of floats, where 2**53 + 1 became 2**53 (the id
    of another prompt, silently). Such a column is read as the file's text (a column of mixed kinds), so every id
    stays exact, by every reader; a fraction that cannot be an exact integer (2**53 written as 9007199254740993.0)
    is refused naming its line."""
    from asp_cli.reading.stream import read_prompts_streamed

    big = 2**53 + 1
    rows = [{"id": 3.0, "question": "a"}, {"id": big, "question": "b"}, {"id": 2**53, "question": "c"},
            {"id": -big, "question": "d"}]
    lines = tmp_path / "p.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    array = tmp_path / "p.json"
    array.write_text(json.dumps(rows))
    expected = ["3", str(big), str(2**53), str(-big)]
    for read in (read_prompts, read_prompts_streamed):
        for source in (lines, array):
            assert read([source])[0]["prompt_id"].to_list() == expected, (read, source)
    history = tmp_path / "h.jsonl"
    history.write_text(json.dumps({"prompt_id": 1.0, "response_tokens": 5}) + "\n"
                       + json.dumps({"prompt_id": big, "response_tokens": 7}) + "\n")
    assert read_lengths([history])[0]["prompt_id"].to_list() == ["1", str(big)]
    rounded = tmp_path / "r.jsonl"
    rounded.write_text('{"id": 3, "question": "a"}\n{"id": 9007199254740993.0, "question": "b"}\n')
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=r"r.jsonl:2: column 'id' \(the id\) is the number 9007199254740992(\.0)?, "
                                             r"too large to be an exact integer \(write such ids as text\)"):
            read([rounded])
    # Integers beyond 64 bits alone, as the docs say, in a JSON array too (Polars made them Int128 ids there).
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps([{"id": 2**70 + i, "question": "q"} for i in range(2)]))
    with pytest.raises(InputError, match=r"huge.json:1: column 'id' \(the id\) is the integer 1180591620717411303424, "
                                         r"too large for 64 bits"):
        read_prompts([huge])
    # Unsigned 64 bits: a Parquet uint64 id is read as its text, so the same id as a JSON integer (asp export writes
    # it so) is too, in prompts and in lengths alike (it was refused, breaking the loop for hash-based ids).
    top = 2**64 - 1
    unsigned = write_jsonl(tmp_path / "u.jsonl", [{"id": top, "question": "q"}, {"id": 2, "question": "r"}])
    for read in (read_prompts, read_prompts_streamed):
        assert read([unsigned])[0]["prompt_id"].to_list() == [str(top), "2"]
    parquet = tmp_path / "u.parquet"
    pq.write_table(pa.table({"id": pa.array([top, 2], pa.uint64()), "question": ["q", "r"]}), parquet)
    assert read_prompts([parquet])[0]["prompt_id"].to_list() == [str(top), "2"]
    log = write_jsonl(tmp_path / "ulog.jsonl", [{"prompt_id": top, "response_tokens": 5}])
    assert read_lengths([log])[0]["prompt_id"].to_list() == [str(top)]


@pytest.mark.parametrize("args", [
    ["schedule", "p.jsonl", "-o"], ["export", "s.parquet", "p.jsonl", "-o"], ["observe", "log.jsonl", "-o"],
    ["probe", "p.jsonl", "-o"], ["predictor", "fit", "p.jsonl", "--history", "h.jsonl", "-o"],
    ["predictor", "predict", "p.jsonl", "-o"], ["replay", "s.parquet", "--dry-run", "-o"],
    ["calibrate", "t.parquet", "-o"], ["report", "s.parquet", "--html"], ["bench", "--markdown"],
])
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_output_path_is_a_usage_error_naming_the_option(tmp_path, args, empty):
    """A hostile-input audit: `-o ""` (an unset shell variable) was read as the current folder: "Error: . is a
    directory; name a file" (exit 7), or a name "." refused for its missing extension (exit 4)."""
    result = runner.invoke(app, [*args, empty])
    option = "'--output' / '-o'" if args[-1] == "-o" else f"'{args[-1]}'"
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: Invalid value for {option}: the path is empty{' (only blanks)' if empty else ''}; name the file "
        "to write")


def test_a_trailing_slash_names_a_folder(tmp_path):
    result = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", f"{tmp_path}/out.parquet/"])
    assert result.exit_code == 7 and "ends with '/', so it names a folder" in result.stderr
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OutputError, match="names a folder"):
        from asp_cli.arrange.pipeline import schedule

        schedule([SAMPLE_PROMPTS], f"{tmp_path}/out.parquet/")


@pytest.mark.parametrize("command", [["observe", "{log}"], ["predictor", "fit", "{log}"],
                                     ["predictor", "predict", str(SAMPLE_PROMPTS)]])
@pytest.mark.parametrize("folder", ["sub", "new"])
def test_a_trailing_slash_names_a_folder_before_the_name_is_checked_for_its_extension(tmp_path, command, folder):
    """A hostile-input round: `asp observe log.jsonl -o sub/` (an existing folder or not) was told "the name has no
    extension" (E34, exit 4), where E54 (exit 7) says what is wrong."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": f"p{i}", "prompt": f"q {i}", "response_tokens": 10 + i}
                                               for i in range(20)])
    (tmp_path / "sub").mkdir()
    output = f"{tmp_path}/{folder}/"
    result = runner.invoke(app, [*(a.format(log=log) for a in command), "-o", output])
    assert result.exit_code == 7, result.output
    assert result.stderr == f"Error: {output} ends with '/', so it names a folder; name the output file without the slash\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "sub"] and not any((tmp_path / "sub").iterdir())


@pytest.mark.parametrize("version, accepted", [
    ("1.0", True), ("1.7", True), ("1.999", True), (1.999, False), (1, False), ("1", False), ("1.0.0", False),
    ("01.0", False), (" 1.0", False), ("1_0.0", False), ("1.-1", False), ("１.０", False), (None, False),
    ("2.0", False), ("0.9", False),
])
def test_format_versions_are_text_major_dot_minor(tmp_path, version, accepted):
    from asp_cli.schedule_format import METADATA_KEY, read_schedule

    path = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(path)]).exit_code == 0
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["format_version"] = version
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), path)
    if accepted:
        read_schedule(path)
    else:
        with pytest.raises(ScheduleFormatError) as caught:
            read_schedule(path)
        assert str(path) in str(caught.value)


def test_observe_names_a_missing_log_with_exit_3(tmp_path):
    result = runner.invoke(app, ["observe", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "h.parquet")])
    assert result.exit_code == 3 and result.stderr.startswith(f"Error: {tmp_path / 'missing.jsonl'}: no such ")
    assert result.stderr.count("\n") == 1


def test_fitting_twice_gives_the_same_bytes(tmp_path):
    from _predictor_data import make_data
    from _predictor_data import write_jsonl as write_rollouts

    prompts, lengths = make_data()
    data = tmp_path / "rollouts.jsonl"
    write_rollouts(data, prompts, lengths)
    for name in ("a.skops", "b.skops"):
        assert runner.invoke(app, ["predictor", "fit", str(data), "-o", str(tmp_path / name)]).exit_code == 0
    assert (tmp_path / "a.skops").read_bytes() == (tmp_path / "b.skops").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.skops") as archive:
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert archive.namelist()[0] == "schema.json" and archive.namelist()[-1] == "asp_meta.json"
    from asp_cli.predict import model as P

    assert P.load(tmp_path / "a.skops").card()["training"]["prompts"] == 80


def test_ctrl_c_while_waiting_for_the_lock_exits_130_at_once(tmp_path):
    """The lock is polled, so an interrupt is handled while another run holds it (no wait for that run)."""
    history = tmp_path / "h.parquet"
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"prompt_id": "s", "response_tokens": 1}])
    assert runner.invoke(app, ["observe", str(seed), "-o", str(history)]).exit_code == 0
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p", "response_tokens": 3}])
    holder = Paused(asp_command("observe", str(log), "-o", str(history), "--append", "--quiet"), "locked")
    assert holder.reached
    waiter = Paused(asp_command("observe", str(seed), "-o", str(history), "--append", "--quiet"), "lock-wait")
    assert waiter.reached
    waiter.resume()
    waiter.signal(signal.SIGINT)
    assert waiter.wait() == (130, "", "Interrupted; nothing was written.\n")
    holder.resume()
    assert holder.wait()[0] == 0


def test_a_second_signal_while_unwinding_exits_at_once(monkeypatch, tmp_path):
    """The first signal raises; a second one (the first still unwinding) removes temporary files and exits."""
    from asp_cli import output
    from asp_cli.cli import interrupts

    tmp = tmp_path / (".out" + output.TMP_MARKER + "1")
    tmp.write_bytes(b"half")
    monkeypatch.setattr(output, "_live", {tmp})
    monkeypatch.setattr(interrupts._State, "received", [])
    monkeypatch.setattr(interrupts._State, "announced", False)
    exits: list[int] = []
    monkeypatch.setattr(interrupts.os, "_exit", lambda code: exits.append(code))
    with pytest.raises(interrupts.Interrupted):
        interrupts.handle(signal.SIGINT, None)
    assert exits == [] and tmp.exists()
    interrupts.handle(signal.SIGINT, None)
    assert exits == [130] and not tmp.exists() and interrupts._State.announced


def test_tokenizer_and_benchmark_json_are_checked_for_depth(tmp_path):
    """The last JSON documents asp hands to other parsers: a --tokenizer file and the benchmark's --data files."""
    from asp_cli.bench.data import read_ndjson
    from asp_cli.predict.features import load_tokenizer

    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text('{"version": "1.0", "x": ' + nested(100_000) + "}")
    with pytest.raises(InputError, match=f"tokenizer.json: JSON nested more than {LIMIT} levels deep"):
        load_tokenizer(tokenizer)
    problems = tmp_path / "problems.jsonl"
    problems.write_text('{"id": 1, "problem": "q"}\n{"id": 2, "problem": "r", "x": ' + nested(100_000) + "}\n")
    with pytest.raises(InputError, match=f"problems.jsonl:2: JSON nested more than {LIMIT} levels deep"):
        read_ndjson(problems)
    problems.write_text('{"id": 1, "problem": "q"}\n')
    assert read_ndjson(problems).height == 1


@pytest.mark.parametrize("odd, bad", [(42, True), ({"x": 1}, True), ("plain text", False)])
def test_one_odd_prompt_among_chat_lists_is_its_own_row(tmp_path, odd, bad):
    # A column of mixed kinds: every chat list is read, text stays text, and only the odd row is bad, named by
    # its own line; skipping it keeps the others (before, every chat row was tagged bad and line 1 named).
    rows = [{"id": f"p{i}", "prompt": [{"role": "user", "content": f"question {i}"}]} for i in range(6)]
    rows[3]["prompt"] = odd
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if bad:
        with pytest.raises(InputError, match=r"mixed\.jsonl:4: column 'prompt'"):
            read_prompts([path])
        frame, report = read_prompts([path], ReadOptions(on_bad_row="skip"))
        assert frame["prompt_id"].to_list() == ["p0", "p1", "p2", "p4", "p5"]
    else:
        frame, _ = read_prompts([path])
        assert frame.height == 6 and frame["prompt_text"][3] == "plain text"
        assert frame["prompt_text"][0] == "question 0"


def test_an_interrupt_swallowed_by_a_finalizer_still_stops_the_run_with_one_line(tmp_path):
    """Ctrl-C landing in a generator's ``finally`` while the garbage collector closed it (the reader's hashing
    thread hand-off) printed "Exception ignored ... Traceback" and let the command go on."""
    import subprocess
    import sys

    script = (
        "import gc, time\n"
        "from asp_cli.cli import interrupts\n"
        "interrupts.install()\n"
        "def pieces():\n"
        "    try:\n"
        "        yield 1\n"
        "    finally:\n"
        "        raise interrupts.Interrupted\n"
        "reader = pieces(); next(reader); del reader; gc.collect()\n"
        "print('went on')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130
    assert done.stderr == "Interrupted; nothing was written.\n" and done.stdout == ""


@pytest.mark.parametrize("name, content, shown", [
    ("nl.jsonl", '{"id": "a", "bad\\ncol": "x"}\n', "columns are: id, bad\\ncol;"),
    ("nl.csv", 'id,"multi\nline"\na,x\n', "columns are: id, multi\\nline;"),
    ("esc.jsonl", '{"id": "a", "\\u001b]0;owned\\u0007": "x"}\n', "columns are: id, \\x1b]0;owned\\x07;"),
])
def test_an_error_quoting_a_control_character_stays_one_line(tmp_path, name, content, shown):
    """A column name with a newline (a JSON key, a quoted CSV header) split the error in two lines; one with an
    escape sequence reached a terminal as one (a title change, colours). Every error is one line, controls
    written as escapes."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["schedule", str(path), "-o", str(tmp_path / "s.parquet")])
    assert result.exit_code == 3, result.output
    assert result.stderr.count("\n") == 1 and shown in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_a_lock_file_that_is_a_folder_is_named_as_one(tmp_path):
    history = tmp_path / "h.parquet"
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"prompt_id": "s", "response_tokens": 1}])
    assert runner.invoke(app, ["observe", str(seed), "-o", str(history)]).exit_code == 0
    (tmp_path / ".h.parquet.asp-lock").mkdir()
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p", "response_tokens": 3}])
    result = runner.invoke(app, ["observe", str(log), "-o", str(history), "--append"])
    assert result.exit_code == 7 and (".h.parquet.asp-lock is a folder, where asp keeps the lock of h.parquet while "
                                      "it appends; remove it (rmdir) and run again") in result.stderr


@pytest.mark.parametrize("call, words", [
    (lambda t: __import__("asp_cli").calibrate(t / "tl.parquet", t / "keep.json", force="no"),
     "force must be True or False (got 'no')"),
    (lambda t: __import__("asp_cli").observe([t / "log.jsonl"], t / "keep.json", append="no"),
     "append must be True or False (got 'no')"),
    (lambda t: __import__("asp_cli").simulate_file(t / "s.parquet", compare="yes"), "compare must be True or False"),
    (lambda t: __import__("asp_cli").fit_predictor([t / "log.jsonl"], use_metadata="no"),
     "use_metadata must be True or False"),
    (lambda t: __import__("asp_cli").predict_file([t / "log.jsonl"], model=3), "model must be a path"),
    (lambda t: __import__("asp_cli").predictor_info(3), "model must be a path"),
])
def test_a_python_user_s_flags_and_paths_of_the_wrong_type_are_settings_errors(tmp_path, call, words):
    """A hostile-input round: force="no" replaced the file, append="no" appended, model=3 was a TypeError."""
    from asp_cli.errors import SettingsError

    keep = tmp_path / "keep.json"
    keep.write_text('{"mine": 1}')
    (tmp_path / "log.jsonl").write_text('{"prompt_id": "a", "response_tokens": 5}\n')
    with pytest.raises(SettingsError, match=re.escape(words)):
        call(tmp_path)
    assert keep.read_text() == '{"mine": 1}'


@pytest.mark.parametrize("edit", [lambda card: card["training"].pop("train_rmse_log"),
                                  lambda card: card.update(name=float("nan")),
                                  lambda card: card.update(evaluation={"tau": float("inf")})])
def test_predictor_info_json_of_a_card_without_a_finite_number_is_valid_json(tmp_path, small_model, edit):
    """A card without train_rmse_log (read as NaN), or with a NaN or an infinity of its own: `asp predictor info
    --json` was exit 70 (JSON has no NaN); they are null, and the model saved again loads."""
    from asp_cli.predict import model as P

    path = _with_card(tmp_path, small_model[0], edit)
    result = runner.invoke(app, ["predictor", "info", str(path), "--json", "-q"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert None in (card["training"]["train_rmse_log"], card.get("name"), (card.get("evaluation") or {}).get("tau"))
    again = tmp_path / "again.skops"
    P.save(P.load(path), again)
    json.dumps(P.load(again).card(), allow_nan=False)
