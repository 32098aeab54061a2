"""A dataset's own rows written back: asp's columns nested into an object field (`asp export --metadata-key`), the
rest of each row as the user wrote it."""

from __future__ import annotations

import json

import polars as pl
import pytest
from util import write_jsonl

from asp_cli.errors import InputError, SettingsError
from asp_cli.integrate.dataset_rows import _into_object
from asp_cli.integrate.export import ASP_COLUMNS, export

NESTED = ["prompt_id", *ASP_COLUMNS]


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', '{"a": 1,"metadata":{"seq":3}}'),
    ('{}', '{"metadata":{"seq":3}}'),
    ('{ "metadata" : null }', '{ "metadata" : {"seq":3} }'),
    ('{"metadata":{}}', '{"metadata":{"seq":3}}'),
    # Braces and the name inside strings and nested values are not the object's.
    ('{"a": "metadata}", "metadata": {"x": [1, {"}": 2}]} , "b": "m}"}',
     '{"a": "metadata}", "metadata": {"x": [1, {"}": 2}],"seq":3} , "b": "m}"}'),
    # A name written with an escape is the same name; a repeated one is read as its last, as JSON readers do.
    ('{"meta\\u0064ata": {"q": 1}}', '{"meta\\u0064ata": {"q": 1,"seq":3}}'),
    ('{"metadata": {"q": 1}, "metadata": {"r": 2}}', '{"metadata": {"q": 1}, "metadata": {"r": 2,"seq":3}}'),
])
def test_members_go_into_the_named_object_and_the_rest_of_the_text_stays(text, expected):
    assert _into_object(text, "metadata", '"seq":3') == expected
    assert json.loads(expected)  # still JSON


def test_a_named_field_that_is_not_an_object_is_refused():
    with pytest.raises(InputError, match="'metadata' is not an object.*name another field with --metadata-key"):
        _into_object('{"metadata": "text"}', "metadata", '"seq":3')


def _schedule(tmp_path, rows):
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "p.jsonl", rows)
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=4))
    return data, sched


ROWS = [{"id": f"q{i}", "prompt": "What is 1+1? " * (i % 5 + 1), "label": str(i),
         **({"metadata": {"source": "mine", "n": i}} if i % 3 == 0 else {"metadata": None} if i % 3 == 1 else {})}
        for i in range(12)]


def test_jsonl_export_nests_asps_columns_and_the_id_in_each_rows_object(tmp_path):
    """A newcomer on slime: asp's ids never reached the rollout records, since slime keeps only a row's prompt, label
    and `--metadata-key` object, and export wrote them beside the dataset's columns."""
    data, sched = _schedule(tmp_path, ROWS)
    out = tmp_path / "o.jsonl"
    result = export(sched, [data], out, format="jsonl", order="train", metadata_key="metadata")
    by_id = {r["id"]: r for r in ROWS}
    lines = out.read_text().splitlines()
    written = [json.loads(line) for line in lines]
    flat = export(sched, [data], None, format="jsonl", order="train").frame
    assert [w["id"] for w in written] == flat["id"].to_list()
    for line, row in zip(lines, written, strict=True):
        own = by_id[row["id"]]
        assert list(row) == list({**own, "metadata": None})  # no column beside the dataset's own
        kept = own.get("metadata") or {}
        assert list(row["metadata"])[:len(kept)] == list(kept)
        assert {k: row["metadata"][k] for k in kept} == kept
        assert list(row["metadata"])[len(kept):] == NESTED
        assert row["metadata"]["prompt_id"] == row["id"]
        if "metadata" not in own:  # the rest of the row as the user wrote it
            assert line.startswith(json.dumps(own)[:-1] + ', "metadata": {"prompt_id": ')
    assert [w["metadata"]["seq"] for w in written] == flat["seq"].to_list()
    assert result.frame.schema["metadata"] == pl.Struct
    # Read as slime reads its --prompt-data: 0.2.2 and later (v0.3.1 `slime/utils/data.py:32-46,225`) one `json.loads`
    # a line, then `data.get(metadata_key) or {}` (`written` above); 0.2.0 and 0.2.1 through pandas. slime itself is
    # not on PyPI, so not installed here.
    pandas = pytest.importorskip("pandas")
    records = [r.to_dict() for _, r in pandas.read_json(out, lines=True, dtype={"label": str}).iterrows()]
    assert [(r.get("metadata") or {}).get("prompt_id") for r in records] == flat["id"].to_list()


def test_parquet_export_nests_into_a_struct_merged_with_the_rows_own(tmp_path):
    data, sched = _schedule(tmp_path, ROWS)
    out = tmp_path / "o.parquet"
    export(sched, [data], out, metadata_key="metadata")
    frame = pl.read_parquet(out)
    flat = export(sched, [data], None).frame
    assert frame.columns == [c for c in flat.columns if c not in ASP_COLUMNS]
    assert [f.name for f in frame.schema["metadata"].fields] == ["source", "n", *NESTED]
    assert frame["metadata"].struct.field("prompt_id").to_list() == frame["id"].to_list()
    assert frame["metadata"].struct.field("seq").to_list() == flat["seq"].to_list()
    pandas = pytest.importorskip("pandas")
    first = next(pandas.read_parquet(out, dtype_backend="pyarrow").iterrows())[1].to_dict()
    assert first["metadata"]["prompt_id"] == first["id"]
    # As slime 0.2.2 and later read Parquet (v0.3.1 `slime/utils/data.py:52-56,225`): pyarrow batches to dicts.
    pq = pytest.importorskip("pyarrow.parquet")
    records = [r for batch in pq.ParquetFile(out).iter_batches() for r in batch.to_pylist()]
    assert [(r.get("metadata") or {}).get("prompt_id") for r in records] == frame["id"].to_list()


def test_the_metadata_key_is_checked_before_anything_is_written(tmp_path):
    data, sched = _schedule(tmp_path, ROWS)
    clash = write_jsonl(tmp_path / "clash.jsonl", [{**r, "metadata": {"seq": 1}} for r in ROWS])
    with pytest.raises(InputError, match=r"already has field 'seq' in its 'metadata' objects, which asp adds; pass "
                                          "--prefix"):  # 'field(s)' (a slime newcomer's round)
        export(sched, [clash], tmp_path / "o.jsonl", format="jsonl", metadata_key="metadata")
    (tmp_path / "two").mkdir()
    two = write_jsonl(tmp_path / "two" / "two.jsonl", [{**r, "metadata": {"seq": 1, "epoch": 0}} for r in ROWS])
    with pytest.raises(InputError, match=r"already has fields 'epoch', 'seq' in its 'metadata' objects"):
        export(sched, [two], tmp_path / "o.jsonl", format="jsonl", metadata_key="metadata")
    text = write_jsonl(tmp_path / "text.jsonl", [{**r, "metadata": "x"} for r in ROWS])
    with pytest.raises(InputError, match=r"text.jsonl: row 1 \(counting from 1\): 'metadata' holds text, not an "
                                          "object, so asp's columns cannot go into it; name another field"):
        export(sched, [text], tmp_path / "o.jsonl", format="jsonl", metadata_key="metadata")
    with pytest.raises(SettingsError, match="for --format jsonl or parquet"):
        export(sched, [data], tmp_path / "o.parquet", format="verl", metadata_key="metadata")
    with pytest.raises(SettingsError, match="needs a field name"):
        export(sched, [data], tmp_path / "o.jsonl", format="jsonl", metadata_key=" ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clash.jsonl", "p.jsonl", "s.parquet", "text.jsonl", "two"]
    # With a prefix the names inside the object are prefixed too, and clash no more.
    export(sched, [clash], tmp_path / "o.jsonl", format="jsonl", metadata_key="metadata", prefix="asp_")
    row = json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])
    assert list(row["metadata"]) == ["seq", *(f"asp_{c}" for c in NESTED)]


def test_the_export_command_takes_the_metadata_key(tmp_path):
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    data, sched = _schedule(tmp_path, ROWS)
    out = tmp_path / "o.jsonl"
    run = CliRunner().invoke(app, ["export", str(sched), str(data), "-o", str(out), "--format", "jsonl",
                                   "--metadata-key", "info"])
    assert run.exit_code == 0, run.output
    assert all(json.loads(line)["info"]["prompt_id"] for line in out.read_text().splitlines())
    run = CliRunner().invoke(app, ["export", str(sched), str(data), "-o", str(tmp_path / "v.parquet"), "--format",
                                   "verl", "--metadata-key", "info"])
    assert run.exit_code == 4 and "--metadata-key" in run.output


def test_nan_and_infinities_that_json_lines_cannot_hold_are_said(tmp_path):
    """A Parquet dataset's NaN scores left `asp export --format jsonl` as nulls without a word (a hostile-input
    audit); a row written from its own JSON text keeps its own (no note)."""
    import math

    import polars as pl

    from asp_cli.integrate.dataset_rows import non_finite_notes
    from asp_cli.reading.tables import SOURCE_JSON

    frame = pl.DataFrame({"id": ["a", "b", "c"], "score": [math.nan, 1.0, math.inf], "n": [1, 2, 3]})
    assert non_finite_notes(frame) == ["column 'score' holds 2 NaN or infinite values, which JSON cannot hold: "
                                       "written as null; write --format parquet to keep them"]
    assert non_finite_notes(frame.with_columns(pl.lit("{}").alias(SOURCE_JSON))) == []
    assert non_finite_notes(frame.with_columns(pl.lit(0.5).alias("score"))) == []
    # Inside lists and objects too; a row from its own JSON text keeps its values, a row beside it without one not.
    nested = pl.DataFrame({"runs": [[1.0, math.nan], [2.0]], "meta": [{"w": math.inf, "k": 1}, {"w": 0.5, "k": 2}]})
    assert non_finite_notes(nested) == [
        "column 'runs' (runs[]) holds 1 NaN or infinite values, which JSON cannot hold: written as null; write "
        "--format parquet to keep them",
        "column 'meta' (meta.w) holds 1 NaN or infinite values, which JSON cannot hold: written as null; write "
        "--format parquet to keep them"]
    assert non_finite_notes(frame.with_columns(pl.Series(SOURCE_JSON, ["{}", None, "{}"]))) == []
    assert non_finite_notes(frame.with_columns(pl.Series(SOURCE_JSON, [None, "{}", "{}"])))[0].startswith(
        "column 'score' holds 1 NaN")


def _two_files(tmp_path):
    """Two Parquet files whose `reward_model.ground_truth` is text in one and an object in the other (an agent
    newcomer's math and search-QA sets), and a schedule of both."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    math = pl.DataFrame({"id": [f"m{i}" for i in range(6)], "prompt": [f"What is {i}+{i}?" for i in range(6)],
                         "reward_model": [{"style": "rule", "ground_truth": str(2 * i)} for i in range(6)]})
    search = pl.DataFrame({"id": [f"s{i}" for i in range(6)], "prompt": [f"Who wrote book {i}?" for i in range(6)],
                           "reward_model": [{"style": "rule", "ground_truth": {"target": [f"a{i}", f"b{i}"]}}
                                            for i in range(6)]})
    files = [tmp_path / "math.parquet", tmp_path / "search.parquet"]
    math.write_parquet(files[0])
    search.write_parquet(files[1])
    sched = tmp_path / "s.parquet"
    schedule(files, sched, settings=ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=4))
    own = {r["id"]: r["reward_model"] for frame in (math, search) for r in frame.to_dicts()}
    return files, sched, own


def test_files_whose_column_kinds_differ_keep_every_value_as_json_text_and_say_where(tmp_path):
    """Concatenated as they were, the object became the text '{["a0", "b0"]}', its key lost, without a word (an agent
    newcomer's round, 2026-12-06)."""
    files, sched, own = _two_files(tmp_path)
    result = export(sched, files, tmp_path / "o.parquet")
    frame = pl.read_parquet(tmp_path / "o.parquet")
    assert frame.schema["reward_model"] == pl.String
    assert {i: json.loads(v) for i, v in zip(frame["id"], frame["reward_model"], strict=True)} == own
    said = [w for w in result.warnings if w.startswith("reward_model.ground_truth")]
    assert not [w for w in result.warnings if "mixes JSON kinds" in w]  # said once, by the line of its own
    assert said == ["reward_model.ground_truth is text in math.parquet and an object in search.parquet: both are "
                    "written as JSON text, which a trainer reading it as an object will not parse; give the files "
                    "one kind there (verl refuses such a pair outright)"]
    # JSON lines keep each row's own kinds, so nothing needs saying there.
    lines = export(sched, files, tmp_path / "o.jsonl", format="jsonl")
    written = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert {w["id"]: w["reward_model"] for w in written} == own
    assert not [w for w in lines.warnings if "JSON text" in w or "JSON kinds" in w]
    # verl's layout reads one kind a field: refused, naming the field and the way out.
    with pytest.raises(InputError, match=r"'reward_model' holds objects whose field 'ground_truth' is text in some rows "
                                         r"and an object in others.*--format jsonl"):
        export(sched, files, tmp_path / "v.parquet", format="verl")
    assert not (tmp_path / "v.parquet").exists()


def test_a_kind_conflict_is_found_against_every_earlier_file_not_the_first_alone(tmp_path):
    """A review: the first file's column all nulls, text in the second and an object in the third were compared
    with the first only, and the object lost its keys in silence."""
    from asp_cli.integrate.dataset_rows import read_rows

    files = []
    for name, values in (("a", [None, None]), ("b", ["x", "y"]), ("c", [{"t": ["p"]}, {"t": ["q"]}])):
        files.append(tmp_path / f"{name}.parquet")
        pl.DataFrame({"prompt": [f"{name}1", f"{name}2"], "gt": values}).write_parquet(files[-1])
    differing: list[str] = []
    rows = read_rows(files, differing=differing)
    assert [line.split(":")[0] for line in differing] == ["gt is text in b.parquet and an object in c.parquet"]
    assert [json.loads(v) if v and v.startswith("{") else v for v in rows["gt"].to_list()] == [
        None, None, "x", "y", {"t": ["p"]}, {"t": ["q"]}]


@pytest.mark.parametrize(("a", "b", "expected"), [
    (pl.Int32, pl.Float64, None),
    (pl.Null, pl.Struct({"x": pl.String}), None),
    (pl.Struct({"x": pl.Int64, "y": pl.String}), pl.Struct({"x": pl.Int8, "z": pl.List(pl.String)}), None),
    (pl.List(pl.Int64), pl.List(pl.String), ("c[]", "a number", "text")),
    (pl.Struct({"x": pl.Struct({"y": pl.Boolean})}), pl.Struct({"x": pl.Struct({"y": pl.String})}),
     ("c.x.y", "a boolean", "text")),
    (pl.String, pl.List(pl.String), ("c", "text", "a list")),
])
def test_a_kind_conflict_is_the_first_place_two_types_cannot_share(a, b, expected):
    from asp_cli.integrate.dataset_rows import kind_conflict

    assert kind_conflict(a, b, "c") == expected


def test_metadata_objects_whose_fields_differ_in_kind_take_asps_columns_in_json_lines(tmp_path):
    """A JSON dataset whose metadata objects hold a field as a number in one row and as text in another is read
    with that column as the objects' JSON text: `asp export --metadata-key metadata` refused it as "not an object in
    every row" (a slime newcomer's round), though JSON lines keep each row's own object. Now JSON lines nest asp's
    columns into every row's own object; a Parquet output, one column, is refused naming the row and the way out;
    a row whose metadata is no object is named with its kind."""
    data, sched = _schedule(tmp_path, ROWS)
    kinds = write_jsonl(tmp_path / "kinds.jsonl", [{**r, "metadata": {"a": 1 if i % 2 else "x"}}
                                                   for i, r in enumerate(ROWS)])
    out = export(sched, [kinds], tmp_path / "o.jsonl", format="jsonl", metadata_key="metadata")
    written = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r["metadata"] for r in written}
    for i, r in enumerate(ROWS):
        assert by_id[r["id"]]["a"] == (1 if i % 2 else "x") and by_id[r["id"]]["prompt_id"] == r["id"]
    assert out.frame.height == len(ROWS)
    with pytest.raises(InputError, match=r"kinds.jsonl: row 1 \(counting from 1\): 'metadata' holds text, not an "
                                          r"object, .*export them to JSON lines"):
        export(sched, [kinds], tmp_path / "o.parquet", format="parquet", metadata_key="metadata")
    number = write_jsonl(tmp_path / "number.jsonl", [{**r, "metadata": 5 if i == 2 else {"a": 1}}
                                                     for i, r in enumerate(ROWS)])
    with pytest.raises(InputError, match=r"number.jsonl: row 3 \(counting from 1\): 'metadata' holds a number, not "
                                          "an object"):
        export(sched, [number], tmp_path / "n.jsonl", format="jsonl", metadata_key="metadata")
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "n.jsonl").exists()


def test_only_objects_read_as_their_text_are_told_to_export_json_lines(tmp_path):
    """The "export them to JSON lines" way out is for a JSON file's objects that asp's reader gave as their text (their
    fields differ in kind from row to row, in one file or across files), which JSON lines keep as each row holds them.
    A column holding JSON text in the file itself (a Parquet dataset's metadata as JSON text, or JSON strings in
    JSON lines) was told it too, where JSON lines refuse it the same way (a newcomer's round): it is refused naming
    the row and its kind alone, with either output."""
    _, sched = _schedule(tmp_path, ROWS)
    as_json = [{**r, "metadata": json.dumps({"n": i})} for i, r in enumerate(ROWS)]
    parquet = tmp_path / "text.parquet"
    pl.DataFrame(as_json).write_parquet(parquet)
    strings = write_jsonl(tmp_path / "strings.jsonl", as_json)
    for data in (parquet, strings):
        for out in ("o.parquet", "o.jsonl"):
            with pytest.raises(InputError) as refused:
                export(sched, [data], tmp_path / out, metadata_key="metadata",
                       format="jsonl" if out.endswith(".jsonl") else "parquet")
            assert str(refused.value) == (f"{data}: row 1 (counting from 1): 'metadata' holds text, not an object, so "
                                          "asp's columns cannot go into it; name another field with --metadata-key")
    # objects whose kinds differ across two files (each file's own are of one kind): the way out is said, and works
    first = write_jsonl(tmp_path / "a.jsonl", [{**r, "metadata": {"n": 1}} for r in ROWS[:6]])
    second = write_jsonl(tmp_path / "b.jsonl", [{**r, "metadata": {"n": "x"}} for r in ROWS[6:]])
    with pytest.raises(InputError, match=r"'metadata' holds text, not an object, .*\(a JSON file's objects whose "
                                         r"fields differ in kind from row to row are read as their text: export them "
                                         r"to JSON lines, an output ending \.jsonl\)"):
        export(sched, [first, second], tmp_path / "o.parquet", metadata_key="metadata")
    export(sched, [first, second], tmp_path / "o.jsonl", format="jsonl", metadata_key="metadata")
    written = [json.loads(line)["metadata"] for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert sorted(m["prompt_id"] for m in written) == sorted(r["id"] for r in ROWS)
    assert {m["n"] for m in written} == {1, "x"} and not (tmp_path / "o.parquet").exists()
