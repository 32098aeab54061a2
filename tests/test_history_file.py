"""asp_cli.integrate.history_file: the history `asp observe` appends to is checked as `asp schedule --history`
checks it, and is refused rather than rewritten where appending would lose or launder what it holds."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from util import Paused, asp_command, write_jsonl

from asp_cli.errors import InputError
from asp_cli.integrate.history_file import METADATA_KEY
from asp_cli.integrate.observe import observe, read_history


def _history(tmp_path):
    path = tmp_path / "h.parquet"
    observe([write_jsonl(tmp_path / "log1.jsonl", [{"id": "1", "response_tokens": 10},
                                                    {"id": "2", "response_tokens": 20}])], path)
    return path, pq.read_table(path)


def _edited(tmp_path, table, metadata=None):
    path = tmp_path / "edited.parquet"
    pq.write_table(table.replace_schema_metadata(metadata or table.schema.metadata), path)
    return path


def _document(table) -> dict:
    return json.loads(table.schema.metadata[METADATA_KEY])


@pytest.mark.parametrize("edit, said", [
    # 12.7 was appended back as 12, which asp schedule then took; 1e12 was carried into a file it refused.
    (lambda t: (t.set_column(1, "response_tokens", pa.array([12.7, 20.0])), None),
     r"row 1: column 'response_tokens' is not a whole token count \(12.7\) for prompt id '1'; a damaged history is not "
     "appended to"),
    (lambda t: (t.append_column("reward", pa.array([1.0, 0.0])), None),
     r"holds columns an asp history does not \(reward\), which appending would drop"),
    (lambda t: (t, {METADATA_KEY: json.dumps({**_document(t), "format_version": "9.0"}).encode()}),
     "an asp history of format 9.0, newer than this asp's 1.0"),
    # A hostile-input round: an entry with no fingerprint, and a format_version written as a number, were appended to.
    (lambda t: (t, {METADATA_KEY: json.dumps({**_document(t), "logs": [{"path": 5}]}).encode()}),
     r"damaged asp history metadata \(its list of the logs already observed: log entry 0 has no fingerprint"),
    (lambda t: (t, {METADATA_KEY: json.dumps({**_document(t), "format_version": 1.0}).encode()}),
     r"damaged asp history metadata \(its list of the logs already observed: format_version 1.0 is not text "
     r"\"MAJOR.MINOR\" of two whole numbers\)"),
    # The schedule reader's rule: "1.0.0" was read as format 1 and appended to.
    (lambda t: (t, {METADATA_KEY: json.dumps({**_document(t), "format_version": "1.0.0"}).encode()}),
     r"damaged asp history metadata \(its list of the logs already observed: format_version '1.0.0' is not text "
     r"\"MAJOR.MINOR\" of two whole numbers\), so appending could add a log twice"),
    # Without its list of logs, the same log was appended twice (2 rows became 4).
    (lambda t: (t, {METADATA_KEY: json.dumps({k: v for k, v in _document(t).items() if k != "logs"}).encode()}),
     r"damaged asp history metadata \(its list of the logs already observed\)"),
])
def test_a_history_appending_would_launder_or_lose_is_refused_and_left_as_it_is(tmp_path, edit, said):
    _, table = _history(tmp_path)
    edited = _edited(tmp_path, *edit(table))
    before = edited.read_bytes()
    log = write_jsonl(tmp_path / "log2.jsonl", [{"id": "3", "response_tokens": 30}])
    with pytest.raises(InputError, match=said):
        observe([log], edited, append=True)
    assert edited.read_bytes() == before


def test_an_untouched_history_is_appended_to(tmp_path):
    path, _ = _history(tmp_path)
    observe([write_jsonl(tmp_path / "log2.jsonl", [{"id": "3", "response_tokens": 30}])], path, append=True)
    frame, logs = read_history(path)
    assert frame["response_tokens"].to_list() == [10, 20, 30] and [e["name"] for e in logs] == ["log1.jsonl",
                                                                                               "log2.jsonl"]


def test_a_forced_write_waits_for_an_appender_instead_of_being_overwritten_by_it(tmp_path):
    """An `observe --force` that replaced the history while an appender worked was lost under the appender's
    write, both exiting 0. It now takes the lock: it replaces the file once the appender is done."""
    path, _ = _history(tmp_path)
    appending = write_jsonl(tmp_path / "b.jsonl", [{"id": "b", "response_tokens": 6}])
    forced = write_jsonl(tmp_path / "c.jsonl", [{"id": "c", "response_tokens": 7}])
    appender = Paused(asp_command("observe", str(appending), "-o", str(path), "--append", "-q"), "locked")
    assert appender.reached
    import subprocess

    force = subprocess.Popen(asp_command("observe", str(forced), "-o", str(path), "--force", "-q"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    appender.resume()
    assert appender.wait()[0] == 0
    assert force.wait(timeout=300) == 0, force.stderr.read()
    frame, logs = read_history(path)
    assert [e["name"] for e in logs] == ["c.jsonl"] and frame["prompt_id"].to_list() == ["c"]
