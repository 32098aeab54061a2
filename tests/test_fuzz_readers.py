"""Fuzzing the readers: random bytes and random JSON structures give a result or a clean InputError."""

import json
import os

import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from asp_cli.errors import InputError
from asp_cli.predict.predictions_file import predictions_from_files
from asp_cli.reading import ReadOptions, read_lengths, read_prompts

SUFFIXES = [".jsonl", ".json", ".csv", ".parquet", ".jsonl.gz", ".csv.gz"]

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.integers(), st.floats(),
                         st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)
keys = st.sampled_from(["prompt", "messages", "question", "id", "uid", "length", "response_tokens", "x", "difficulty",
                        "data_source", "content", "role", "epoch", "truncated", "predicted_tokens",
                        "predicted_max_tokens", "prompt_tokens"])
records = st.lists(st.dictionaries(keys, json_values, max_size=5), min_size=0, max_size=6)
# ASP_FUZZ_EXAMPLES raises the number of draws when hunting (with HYPOTHESIS_PROFILE=explore).
fuzz = settings(max_examples=int(os.environ.get("ASP_FUZZ_EXAMPLES", "120")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _outcome(call):
    try:
        frame, _ = call()
    except InputError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return None
    assert isinstance(frame, pl.DataFrame) and frame.height > 0
    return frame


@given(data=st.binary(max_size=400), suffix=st.sampled_from(SUFFIXES))
@fuzz
def test_random_bytes(tmp_path_factory, data, suffix):
    path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
    path.write_bytes(data)
    _outcome(lambda: read_prompts([path]))
    _outcome(lambda: read_lengths([path]))
    _outcome(lambda: read_prompts([path], ReadOptions(on_bad_row="skip")))


@given(rows=records, as_array=st.booleans(), skip=st.booleans())
# Found by CI: 2**63 as a float passed the whole-number check and then failed the cast to int64.
@example(rows=[{"prompt": None, "id": False, "length": 9.223372036854776e18}], as_array=False, skip=False)
@example(rows=[{"id": 1, "length": float("inf")}, {"id": 2, "length": 5, "epoch": 2**40}], as_array=True, skip=True)
@example(rows=[{"length": [], "id": False}, {"truncated": []}], as_array=False, skip=False)
@example(rows=[{"messages": {}}, {"messages": [], "id": False, "predicted_tokens": [False, []]}], as_array=False,
         skip=True)
# A list of lengths mixing kinds is read element by element; an element that is itself a list is a bad row.
@example(rows=[{"id": "a", "length": [[], 1, True]}, {"id": "b", "length": [2]}], as_array=False, skip=True)
@fuzz
def test_random_json_structures(tmp_path_factory, rows, as_array, skip):
    folder = tmp_path_factory.mktemp("fuzz")
    if as_array:
        path = folder / "input.json"
        path.write_text(json.dumps(rows))
    else:
        path = folder / "input.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mode = "skip" if skip else "error"
    frame = _outcome(lambda: read_prompts([path], ReadOptions(on_bad_row=mode)))
    if frame is not None:
        assert frame["prompt_id"].n_unique() == frame.height
        assert frame["prompt_text"].null_count() == 0
    lengths = _outcome(lambda: read_lengths([path], ReadOptions(on_bad_row=mode)))
    if lengths is not None:
        assert (lengths["response_tokens"] >= 0).all()
    if frame is not None:
        try:
            predicted, _ = predictions_from_files(frame, [path], fingerprint="fuzz", max_response_tokens=4096)
        except InputError as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert predicted.height == frame.height
            assert (predicted["predicted_tokens"] <= 4096).all()
