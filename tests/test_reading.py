import gzip
import json
import re

import polars as pl
import pytest

from asp_cli.errors import InputError
from asp_cli.reading import ReadOptions, read_lengths, read_prompts, read_table

from util import make_prompts, write_jsonl

CHAT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is 2+2?"}]


def test_verl_chat_prompt_is_joined_text(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": CHAT, "uid": "a"}, {"prompt": CHAT[1:], "uid": "b"}])
    frame, report = read_prompts([path])
    assert frame["prompt_text"].to_list() == ["be brief\nwhat is 2+2?", "what is 2+2?"]
    assert frame["n_messages"].to_list() == [2, 1]
    assert frame["prompt_id"].to_list() == ["a", "b"]
    assert report.columns_used[str(path)] == {"prompt": "prompt", "id": "uid"}


PARTS = [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"},
                                      {"type": "image_url", "image_url": {"url": "file:///x.png"}},
                                      {"type": "text", "text": "Show work."}]}]


@pytest.mark.parametrize("layout", ["jsonl", "mixed-jsonl", "json-text", "json-array", "parquet"])
def test_multi_part_content_is_scheduled_by_its_text_parts(tmp_path, layout):
    plain = [{"role": "user", "content": "plain question"}]
    if layout == "jsonl":
        path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "prompt": PARTS}])
    elif layout == "mixed-jsonl":  # one row with multi-part content, one with a plain string
        path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "prompt": PARTS}, {"id": "b", "prompt": plain}])
    elif layout == "json-text":
        path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "messages": json.dumps(PARTS)}])
    elif layout == "json-array":
        path = tmp_path / "p.json"
        path.write_text(json.dumps([{"id": "a", "prompt": PARTS}, {"id": "b", "prompt": plain}]))
    else:
        path = tmp_path / "p.parquet"
        parts = [{"type": "text", "text": "What is 2+2?"}, {"type": "image_url", "text": None},
                 {"type": "text", "text": "Show work."}]
        pl.DataFrame({"id": ["a"], "prompt": [[{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                                               {"role": "user", "content": parts}]]}).write_parquet(path)
    frame, _ = read_prompts([path])
    row = frame.filter(pl.col("prompt_id") == "a").row(0, named=True)
    assert row["prompt_text"] == "Be brief.\nWhat is 2+2?\nShow work."
    assert row["n_messages"] == 2
    if layout in ("mixed-jsonl", "json-array"):
        assert frame.filter(pl.col("prompt_id") == "b")["prompt_text"].item() == "plain question"


@pytest.mark.parametrize("layout", ["jsonl", "mixed-jsonl", "parquet"])
def test_a_content_that_is_a_list_of_strings_is_its_strings_and_a_text_part_that_is_a_number_a_bad_row(tmp_path,
                                                                                                          layout):
    """A hostile-input audit: a 200-word content given as a list of strings was scheduled as an empty prompt, and a
    part {"type": "text", "text": 5} as one too, where a content of 5 is a bad row."""
    strings = [{"role": "user", "content": ["What is", "2+2?"]}]
    plain = [{"role": "user", "content": "plain question"}]
    if layout == "parquet":
        path = tmp_path / "p.parquet"
        pl.DataFrame({"id": ["a"], "prompt": [strings]}).write_parquet(path)
    else:
        path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "prompt": strings}]
                           + ([{"id": "b", "prompt": plain}] if layout == "mixed-jsonl" else []))
    frame, _ = read_prompts([path])
    assert frame.filter(pl.col("prompt_id") == "a")["prompt_text"].item() == "What is\n2+2?"
    numbered = [{"role": "user", "content": [{"type": "text", "text": 5}]}]
    if layout == "parquet":
        pl.DataFrame({"id": ["a"], "prompt": [numbered]}).write_parquet(path)
        where = f"{path}"
    else:
        write_jsonl(path, [{"id": "b", "prompt": plain}, {"id": "a", "prompt": numbered}]
                    if layout == "mixed-jsonl" else [{"id": "a", "prompt": numbered}])
        where = f"{path}:{2 if layout == 'mixed-jsonl' else 1}"
    with pytest.raises(InputError, match=re.escape(where) + r".*holds a chat message whose 'content' is not text"):
        read_prompts([path])


@pytest.mark.parametrize("layout", ["mixed-jsonl", "jsonl", "json-text", "parquet"])
@pytest.mark.parametrize("content", [5, True, {"x": 1}])
def test_a_chat_content_that_is_not_text_is_a_bad_row_named_by_its_line(tmp_path, layout, content):
    """A content of 5 beside text contents was read as the text "5" (Polars decoding into text), and one alone made
    the whole file an error without a line: each is a bad row (E06), named as such, skipped with --on-bad-row skip."""
    odd = [{"role": "user", "content": content}]
    plain = [{"role": "user", "content": "plain question"}]
    if layout == "parquet":
        path = tmp_path / "p.parquet"
        pl.DataFrame({"id": ["a", "b"], "prompt": [odd, odd]}).write_parquet(path)
    elif layout == "json-text":
        path = write_jsonl(tmp_path / "p.jsonl", [{"id": "b", "messages": json.dumps(plain)},
                                                  {"id": "a", "messages": json.dumps(odd)}])
    else:
        rows = [{"id": "a", "prompt": odd}] if layout == "jsonl" else [{"id": "b", "prompt": plain},
                                                                       {"id": "a", "prompt": odd}]
        path = write_jsonl(tmp_path / "p.jsonl", rows)
    line = 1 if layout in ("jsonl", "parquet") else 2
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}(: row |:){line}: column '(prompt|messages)' holds a "
                                         r"chat message whose 'content' is not text \(a number, true/false or an "
                                         r"object\); fix the row, or pass --on-bad-row skip"):
        read_prompts([path])
    if layout in ("mixed-jsonl", "json-text"):
        frame, report = read_prompts([path], ReadOptions(on_bad_row="skip"))
        assert frame["prompt_id"].to_list() == ["b"] and report.skipped_rows == 1


def test_messages_as_json_text_win_over_a_text_prompt(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": 1, "prompt": "system text", "messages": json.dumps(CHAT)}])
    frame, _ = read_prompts([path])
    assert frame["prompt_text"][0] == "be brief\nwhat is 2+2?"


@pytest.mark.parametrize("key", ["question", "problem", "instruction", "input", "prompt"])
def test_text_columns_are_found(tmp_path, key):
    path = write_jsonl(tmp_path / "p.jsonl", [{key: "hello"}])
    frame, _ = read_prompts([path])
    assert frame["prompt_text"][0] == "hello" and frame["prompt_id"][0] == "0"


def test_all_formats_read_the_same(tmp_path):
    rows = [{"id": f"q{i}", "question": f"text {i}", "difficulty": "Level 3"} for i in range(5)]
    frame = pl.DataFrame(rows)
    paths = [
        write_jsonl(tmp_path / "a.jsonl", rows),
        tmp_path / "b.json",
        tmp_path / "c.parquet",
        tmp_path / "d.csv",
        tmp_path / "e.jsonl.gz",
    ]
    paths[1].write_text(json.dumps(rows))
    frame.write_parquet(paths[2])
    frame.write_csv(paths[3])
    paths[4].write_bytes(gzip.compress(paths[0].read_bytes()))
    for path in paths:
        got, _ = read_prompts([path])
        assert got["prompt_id"].to_list() == [f"q{i}" for i in range(5)], path
        assert got["difficulty"].to_list() == [3.0] * 5


def test_overrides_and_missing_columns(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": "hi", "key": "k1"}])
    frame, _ = read_prompts([path], ReadOptions(prompt_key="text", id_key="key"))
    assert frame["prompt_id"][0] == "k1"
    with pytest.raises(InputError, match=r"no prompt column found .* columns are: text, key; name the right one with --prompt-key"):
        read_prompts([path])
    with pytest.raises(InputError, match="no column 'nope' \\(from --prompt-key\\)"):
        read_prompts([path], ReadOptions(prompt_key="nope"))


@pytest.mark.parametrize("streamed", [False, True])
def test_a_half_written_last_line_is_said_as_cut_short(tmp_path, streamed):
    """`asp observe` of a log still being written met its half-written last line, said as malformed JSON."""
    from asp_cli.reading.stream import read_prompts_streamed

    read = read_prompts_streamed if streamed else read_prompts
    path = tmp_path / "p.jsonl"
    for tail in ('{"question": "b', '{"question": ', '{"question": "b"', '{"question": "b", "ok": tru',
                 '{"question": "b", "n": 12.', '{"question": "b", "x": [1, 2', '{"question": "b\\u00'):
        path.write_text('{"question": "a"}\n' + tail)
        with pytest.raises(InputError, match=r"p.jsonl:2: the file ends inside this line \(cut short"):
            read([path])
        assert read([path], ReadOptions(on_bad_row="skip"))[0].height == 1
    for whole in ('{"question": "a"}\n{"question" "b"}', '{"question": "a"}\n{"question": "b\n',
                  # an earlier bad line whose text is also the unfinished last one's (it was said as cut short)
                  '{"question": "a"}\n{"question": \n{"question": "c"}\n{"question": '):
        path.write_text(whole)  # a typo on an unfinished last line, or the last line ended: malformed as before
        with pytest.raises(InputError, match=r"p.jsonl:2: malformed JSON"):
            read([path])
    # Cut inside a character: it was told to re-encode the file (iconv), which would corrupt it.
    path.write_bytes('{"question": "a"}\n{"question": "日本'.encode()[:-1])
    with pytest.raises(InputError, match=r"p.jsonl:2: the file ends inside a character of this line \(cut short"):
        read([path])


def test_malformed_line_is_named_and_can_be_skipped(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"question": "a"}\n\n{"question": \n{"question": "c"}\n')
    with pytest.raises(InputError, match=r"p.jsonl:3: malformed JSON"):
        read_prompts([path])
    frame, report = read_prompts([path], ReadOptions(on_bad_row="skip"))
    assert frame["prompt_text"].to_list() == ["a", "c"]
    assert report.skipped_rows == 1 and report.skipped_examples == [f"{path}:3"]


def test_prompt_that_is_not_text_is_named(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"question": "a"}\n\n{"question": 5}\n')
    with pytest.raises(InputError, match=r"p.jsonl:3: column 'question' is not text or a chat-message list"):
        read_prompts([path])
    path.write_text('{"question": 5}\n{"question": 6}\n')
    with pytest.raises(InputError, match="not text or a chat-message list"):
        read_prompts([path])
    pieces = tmp_path / "pieces.parquet"  # the prompt as a list of text: joining it is the fix, not --prompt-key
    pl.DataFrame({"problem": [["a", "b"], ["c"]]}).write_parquet(pieces)
    with pytest.raises(InputError, match=r"column 'problem' holds lists of text \(List\(String\)\), not one text per "
                                         r"prompt; join each list into one text"):
        read_prompts([pieces])


def test_duplicate_ids(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "x", "question": "a"}, {"id": "x", "question": "b"}])
    with pytest.raises(InputError, match=r"duplicate prompt id 'x' \(.*p\.jsonl:1, .*p\.jsonl:2\); 1 id repeats\."):
        read_prompts([path])


@pytest.mark.parametrize("streamed", [False, True])
def test_duplicate_ids_name_lines_past_blank_and_skipped_lines(tmp_path, streamed):
    """A newcomer's file with blank lines was told "row 3" of an id on line 6: rows were counted, not lines."""
    from asp_cli.reading.stream import read_prompts_streamed

    read = read_prompts_streamed if streamed else read_prompts
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "question": "x"}\n\n{"id": "b", "question": "y"}\n\n\n{"id": "a", "question": "z"}\n')
    with pytest.raises(InputError, match=r"\(.*p\.jsonl:1, .*p\.jsonl:6\)"):
        read([path])
    path.write_text('{"id": "a", "question": "x"}\n{"id": "c",\n{"id": "b", "question": "y"}\n{"id": "a", "question": "z"}\n')
    with pytest.raises(InputError, match=r"\(.*p\.jsonl:1, .*p\.jsonl:4\)"):
        read([path], ReadOptions(on_bad_row="skip"))
    # Read in batches, a bad line skipped in the first and the repeat in a later one read fast (it said line 22).
    rows = ['{"id": "a", "question": "x"}', '{"id": "c",'] + [f'{{"id": "r{i}", "question": "q"}}' for i in range(20)]
    path.write_text("\n".join([*rows, '{"id": "a", "question": "z"}']) + "\n")
    if streamed:
        import asp_cli.reading.stream as stream

        before = stream._READ_BYTES
        stream._READ_BYTES = 64
        try:
            with pytest.raises(InputError, match=r"\(.*p\.jsonl:1, .*p\.jsonl:23\)"):
                read_prompts_streamed([path], ReadOptions(on_bad_row="skip"), batch_bytes=64)
        finally:
            stream._READ_BYTES = before
    with pytest.raises(InputError, match=r"\(.*p\.jsonl:1, .*p\.jsonl:23\)"):
        read([path], ReadOptions(on_bad_row="skip"))
    parquet = tmp_path / "p.parquet"
    pl.DataFrame({"id": ["a", "b", "a"], "question": ["x", "y", "z"]}).write_parquet(parquet)
    with pytest.raises(InputError, match=r"\(.*p\.parquet row 1, .*p\.parquet row 3\)"):
        read([parquet])


def test_a_much_repeated_or_long_id_makes_a_short_message(tmp_path):
    """An id in 5,000 rows made a 25 KB error line; a whole prompt used as the id was printed whole."""
    from asp_cli.reading.stream import read_prompts_streamed

    rows = [{"id": "x", "question": f"q{i}"} for i in range(5000)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    message = r"duplicate prompt id 'x' \(.*p\.jsonl:1, .*p\.jsonl:2, .*p\.jsonl:3 and 4,997 more\)"
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=message) as caught:
            read([path])
        assert len(str(caught.value)) < 400
    long_id = "y" * 5000
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": long_id, "question": "a"}, {"id": long_id, "question": "b"}])
    with pytest.raises(InputError, match=re.escape(f"duplicate prompt id {'y' * 80!r}... (5,000 characters)")):
        read_prompts([path])


def test_duplicate_ids_across_files_name_each_files_own_row(tmp_path):
    """Each file's own row, counted from 1 like its lines (the row over all inputs was once given instead)."""
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "question": "a"}, {"id": "y", "question": "b"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "z", "question": "c"}, {"id": "x", "question": "d"}])
    with pytest.raises(InputError, match=r"duplicate prompt id 'x' \(.*a\.jsonl:1, .*b\.jsonl:2\)"):
        read_prompts([a, b])
    frame, _ = read_prompts([a, write_jsonl(tmp_path / "c.jsonl", [{"id": "w", "question": "e"}])])
    assert frame["row"].to_list() == [0, 1, 2] and not any(c.startswith("\x00") for c in frame.columns)


@pytest.mark.parametrize(
    "name, content, fragment",
    [
        ("e.jsonl", b"", "the file is empty"),
        ("e.jsonl", b"\n  \n", "the file is empty"),
        ("l.jsonl", b'{"question": "caf\xe9"}\n', "not valid UTF-8"),
        ("x.parquet", b'{"question": "a"}\n', "the name says Parquet but the file looks like JSON lines"),
        ("x.jsonl", b"PAR1....", "looks like a Parquet file"),
        ("x.json", b'{"question": "a"}\n{"question": "b"}\n', "rename it to .jsonl"),
        ("x.jsonl", b'[{"question": "a"}]', "rename it to .json"),
        ("x.txt", b"hello", "unknown file type"),
        ("x.json", b'{"a": ', "malformed JSON"),
        # JSON named .csv: the CSV parser failed on line 2 with its own words and no fix.
        ("x.csv", b'{"id": "a", "question": "hi"}\n{"id": "b", "question": "yo"}\n',
         "the name says CSV but the file looks like JSON lines; rename it"),
        ("x.csv", b'[{"id": "a", "question": "hi"}]', "the name says CSV but the file looks like a JSON array"),
        # A ragged CSV row: Polars' parser named no line.
        ("x.csv", b"id,question\n1,a\n2,b,extra\n", r"x.csv:3: 3 fields where the header has 2; check quoting"),
    ],
)
def test_bad_files_get_one_clear_error(tmp_path, name, content, fragment):
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=fragment):
        read_prompts([path])
    if name.endswith((".jsonl", ".csv")) and content.strip():  # the streamed reader (large inputs) says the same
        with pytest.raises(InputError, match=fragment):
            read_prompts_streamed([path])


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_table(tmp_path / "nope.jsonl")


def test_lengths_per_sample_and_per_prompt_lists(tmp_path):
    per_sample = write_jsonl(tmp_path / "a.jsonl", [{"prompt_id": "a", "completion_tokens": 10},
                                                     {"prompt_id": "a", "completion_tokens": 20}])
    per_prompt = write_jsonl(tmp_path / "b.jsonl", [{"uid": "b", "response_length": [1, 2, 3]}])
    frame, _ = read_lengths([per_sample, per_prompt])
    assert frame["prompt_id"].to_list() == ["a", "a", "b", "b", "b"]
    assert frame["response_tokens"].to_list() == [10, 20, 1, 2, 3]


@pytest.mark.parametrize(
    "value, fragment",
    [(-3, "is negative"), (2.5, "is not a whole token count"), (None, "is missing"), ("many", "is not a number")],
)
def test_bad_lengths_are_named(tmp_path, value, fragment):
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": 4}, {"id": "b", "length": value}])
    with pytest.raises(InputError, match=f"h.jsonl:2: column 'length' {fragment}"):
        read_lengths([path])
    frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
    assert frame["prompt_id"].to_list() == ["a"] and report.skipped_rows == 1


@pytest.mark.parametrize("name, content", [
    ("h.jsonl", '{"id": "a", "length": 4}\n{"id": null, "length": 5}\n'),
    ("h.csv", "id,length\na,4\n,5\n"),
])
def test_a_length_row_without_an_id_is_not_said_to_be_for_prompt_id_none(tmp_path, name, content):
    """It was "column 'id' (the prompt id) is missing for prompt id 'None'"."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_lengths([path])
    assert str(info.value).endswith("column 'id' (the prompt id) is missing; fix the row, or pass --on-bad-row skip "
                                    "to skip bad rows")
    assert "None" not in str(info.value)


@pytest.mark.parametrize("rows", [
    [{"id": "a", "length": [10, True, 30]}, {"id": "b", "length": [5, 6]}],  # a true among the lengths
    [{"id": "a", "length": [True, False]}, {"id": "b", "length": [5, 6]}],  # a row of flags beside a row of lengths
    [{"id": "a", "length": True}, {"id": "b", "length": 6}],  # one sample per row
])
def test_true_or_false_among_lengths_is_a_bad_row_not_a_count(tmp_path, rows):
    """A hostile-input audit: Polars built a list column of [10, true, 30] as [10, 1, 30], so a true counted as a
    response of 1 token (and false as 0), where any other non-number is refused."""
    path = write_jsonl(tmp_path / "h.jsonl", rows)
    with pytest.raises(InputError, match=re.escape("h.jsonl:1: column 'length' holds true, not a token count for "
                                                   "prompt id 'a'; fix the row, or pass --on-bad-row skip")):
        read_lengths([path])
    frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
    assert 1 not in frame["response_tokens"].to_list() and 0 not in frame["response_tokens"].to_list()
    other = rows[1]["length"]
    assert frame.filter(pl.col("prompt_id") == "b")["response_tokens"].to_list() == (other if isinstance(other, list)
                                                                                     else [other])
    assert report.skipped_rows >= 1


def test_lists_of_lengths_that_mix_numbers_and_digit_text_still_read(tmp_path):
    """The reader keeps a list column of mixed kinds as JSON text; the length reader reads it back element by element
    (digit text counts, as it does outside lists), with the flags beside it."""
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": [10, "20", 30.0], "truncated": [False, 1, "no"]},
                                             {"id": "b", "length": [5], "truncated": [True]}])
    frame, _ = read_lengths([path])
    assert frame["response_tokens"].to_list() == [10, 20, 30, 5]
    assert frame["truncated"].to_list() == [False, True, False, True]


def test_truncated_flags_that_mix_booleans_and_text_are_read_as_flags(tmp_path):
    """A hostile-input audit: a `truncated` true among text flags ("false") was refused as "not true or false" (the
    reader tags a true among text, and the tag was not taken off)."""
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": 5, "truncated": True},
                                             {"id": "b", "length": 6, "truncated": "false"},
                                             {"id": "c", "length": 7, "truncated": None}])
    frame, _ = read_lengths([path])
    assert frame["truncated"].to_list() == [True, False, None]


def test_a_column_whose_lists_or_objects_mix_kinds_is_kept_as_json_text(tmp_path):
    """Polars built such a column by coercing: true to 1, a message's list of content parts to its debug text
    ("[{text,What?}]"), {"a": 1} beside {"a": "x"} to "1"."""
    from asp_cli.reading.json_records import JSON_TAG

    parts = [{"type": "text", "text": "What?"}, {"type": "image_url", "image_url": {"url": "file:///x.png"}}]
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": parts}]
    rows = [{"id": "a", "n": [1, True], "meta": {"a": 1}, "prompt": chat, "ok": [1, 2.5]},
            {"id": "b", "n": [2], "meta": {"a": "x"}, "prompt": chat[:1], "ok": [3]}]
    frame = read_table(write_jsonl(tmp_path / "p.jsonl", rows))
    for column in ("n", "meta", "prompt"):
        assert frame[column].to_list() == [JSON_TAG + json.dumps(r[column]) for r in rows], column
    assert frame["ok"].to_list() == [[1.0, 2.5], [3.0]]  # numbers mix, as in a column of them
    prompts, _ = read_prompts([tmp_path / "p.jsonl"])
    assert prompts["prompt_text"].to_list() == ["Be brief.\nWhat?", "Be brief."]


LOOKALIKE_CHAT = "\x00json:" + json.dumps([{"role": "user", "content": "hi"}])


def _lookalike_file(folder, layout: str, rows: list[dict]):
    folder.mkdir(exist_ok=True)
    if layout == "csv":
        path = folder / "p.csv"
        pl.DataFrame(rows).write_csv(path)
        return path
    if layout == "parquet":
        path = folder / "p.parquet"
        pl.DataFrame(rows).write_parquet(path)
        return path
    if layout == "json-array":
        path = folder / "p.json"
        path.write_text(json.dumps(rows))
        return path
    if layout == "mixed-jsonl":  # a number among the texts: the slow reader, which tags it
        rows = [*rows, {k: (7 if k == "id" else 7.5 if k == "length" else "seven") for k in rows[0]}]
    return write_jsonl(folder / "p.jsonl", rows)


@pytest.mark.parametrize("layout", ["jsonl", "mixed-jsonl", "json-array", "csv", "parquet"])
def test_text_that_starts_as_the_readers_tag_is_read_as_text(tmp_path, layout):
    """The readers keep a non-text value of a column of mixed kinds as "\\x00json:" + its JSON text: a user's own
    text that started so was taken for a tagged value: the text "\\x00json:5" was the prompt id 5 and the length 5,
    and as a prompt a bad row, or (a chat list's JSON text behind it) the chat list."""
    rows = [{"id": "\x00json:5", "question": "\x00json:5"}, {"id": "\x00text:b", "question": LOOKALIKE_CHAT},
            {"id": "c", "question": "\x00text:x"}]
    frame, _ = read_prompts([_lookalike_file(tmp_path, layout, rows)])
    assert frame["prompt_id"].to_list()[:3] == ["\x00json:5", "\x00text:b", "c"]
    assert frame["prompt_text"].to_list()[:3] == ["\x00json:5", LOOKALIKE_CHAT, "\x00text:x"]
    assert frame["n_messages"].to_list()[:3] == [1, 1, 1]
    lengths = [{"id": "a", "length": "\x00json:5"}]
    with pytest.raises(InputError, match=r"column 'length' is not a number for prompt id 'a'"):
        read_lengths([_lookalike_file(tmp_path / "h", layout, lengths)])


def test_text_that_starts_as_the_readers_tag_is_no_length_in_a_list(tmp_path):
    for lengths in (["\x00json:5"], [10, "\x00json:5"]):  # a list of text, and one of mixed kinds (tagged)
        path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": lengths}])
        with pytest.raises(InputError, match=r"h.jsonl:1: column 'length' is not a number for prompt id 'a'"):
            read_lengths([path])


def test_a_data_source_of_mixed_kinds_reads_as_the_file_holds_it(tmp_path):
    """A hostile-input audit: a source that is a number among text sources was the reader's tag, "\\x00json:5", in
    the probe's summary (NUL characters on the terminal) and in the per-source calibration, where a file of
    numeric sources gives "5"."""
    mixed = write_jsonl(tmp_path / "m.jsonl", [{"id": "a", "question": "q", "data_source": 5},
                                               {"id": "b", "question": "r", "data_source": "gsm"},
                                               {"id": "c", "question": "s", "data_source": "\x00json:7"}])
    numeric = write_jsonl(tmp_path / "n.jsonl", [{"id": "d", "question": "t", "data_source": 5}])
    frame, _ = read_prompts([mixed, numeric])
    assert frame["data_source"].to_list() == ["5", "gsm", "\x00json:7", "5"]


def test_text_shaped_like_a_date_stays_text(tmp_path):
    """PyArrow's JSON reader takes "2024-01-02" for a timestamp: an id of that shape was refused as "of type
    Datetime, not text or an integer", and a date column changed type on its way through `asp export`."""
    rows = [{"id": "2024-01-01", "question": "q1", "m": {"at": "2024-01-02 10:00:00", "days": ["2024-01-03"]}},
            {"id": "2024-01-04", "question": "q2", "m": {"at": "2024-01-05T10:00:00", "days": []}}]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert read_table(path).to_dicts() == rows
    frame, _ = read_prompts([path])
    assert frame["prompt_id"].to_list() == ["2024-01-01", "2024-01-04"]


@pytest.mark.parametrize("layout", ["jsonl", "jsonl-mixed", "json", "csv", "parquet"])
def test_a_column_named_with_a_leading_nul_is_refused(tmp_path, layout):
    """A hostile-input audit: asp names its hidden columns "\\x00line", "\\x00row", ...; a user's column of such a
    name gave messages its values as line numbers (or was replaced by asp's), and `asp export` dropped it."""
    from asp_cli.reading import read_lengths
    from asp_cli.reading.stream import read_prompts_streamed

    name = "\x00line"
    rows = [{"id": "a", "question": "q1", "response_tokens": 5},
            {"id": "b", "question": "q2", "response_tokens": 6, name: 9}]
    where = {"jsonl": ":2", "jsonl-mixed": ":2", "json": ": element 2 of the array", "csv": ":1", "parquet": ""}[layout]
    if layout.startswith("jsonl"):
        if layout == "jsonl-mixed":  # read line by line, where the reader itself adds its "\x00line" column
            rows[0]["question"] = 7
        path = write_jsonl(tmp_path / "p.jsonl", rows)
    elif layout == "json":
        path = tmp_path / "p.json"
        path.write_text(json.dumps(rows))
    elif layout == "csv":
        path = tmp_path / "p.csv"
        path.write_text(f"id,question,response_tokens,{name}\na,q1,5,\nb,q2,6,9\n")
    else:
        path = tmp_path / "p.parquet"
        pl.DataFrame({"id": ["a", "b"], "question": ["q1", "q2"], "response_tokens": [5, 6],
                      name: [None, 9]}).write_parquet(path)
    message = (f"{path}{where}: column '\\x00line' starts with a NUL character, which asp keeps for its own columns; "
               "rename the column (or drop it)")
    for read in (lambda: read_table(path), lambda: read_prompts([path], ReadOptions(on_bad_row="skip")),
                 lambda: read_lengths([path]), lambda: read_prompts_streamed([path])):
        with pytest.raises(InputError) as caught:
            read()
        assert str(caught.value) == message


def test_a_byte_order_mark_opening_a_later_line_is_dropped_as_the_first_one_is(tmp_path):
    """A hostile-input audit: two CSV files concatenated (each saved with a UTF-8 byte-order mark) left the second's
    mark in its first id, "\\ufeffb", which matches no "b" of a log or history. The mark that opens a file is dropped;
    so is one that opens any line (JSON lines' parsers skip it too; `asp export` writes the line without it)."""
    from asp_cli.reading.stream import read_prompts_streamed
    from asp_cli.reading.tables import SOURCE_JSON

    bom = "\ufeff"
    path = tmp_path / "p.csv"
    path.write_text(f"{bom}id,question,response_tokens\r\na,q1,5\r\n{bom}b,q2,6\r\n{bom}{bom}c,q3,7\n",
                    encoding="utf-8")
    frame, _ = read_prompts([path])
    assert frame["prompt_id"].to_list() == ["a", "b", "c"]
    streamed, _ = read_prompts_streamed([path])
    assert streamed["prompt_id"].to_list() == ["a", "b", "c"]
    assert read_lengths([path])[0]["prompt_id"].to_list() == ["a", "b", "c"]
    lines = tmp_path / "p.jsonl"
    lines.write_text(f'{bom}{{"id": "a", "question": "q1"}}\n{bom}{{"id": "b", "question": "q2"}}\n', encoding="utf-8")
    table = read_table(lines, source_json=True)
    assert table["id"].to_list() == ["a", "b"]
    assert table[SOURCE_JSON].to_list() == ['{"id": "a", "question": "q1"}', '{"id": "b", "question": "q2"}']


def test_csv_lengths_with_overrides(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("key,tok\nx,5\ny,7\n")
    frame, _ = read_lengths([path], ReadOptions(length_id_key="key", length_key="tok"))
    assert frame["response_tokens"].to_list() == [5, 7]


@pytest.mark.parametrize("value, shown", [(-1, "-1"), ("x", "x"), (1.5, "1.5")])
def test_an_epoch_that_is_no_epoch_number_is_a_bad_row(tmp_path, value, shown):
    """-1 was stored as an epoch, and a text value made the whole column unknown."""
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": 4, "epoch": 0}, {"id": "b", "length": 5, "epoch": value},
                                             {"id": "c", "length": 6, "epoch": "2"}])
    with pytest.raises(InputError, match=re.escape(f"h.jsonl:2: column 'epoch' is not an epoch number ({shown};")):
        read_lengths([path])
    frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
    assert frame["prompt_id"].to_list() == ["a", "c"] and frame["epoch"].to_list() == [0, 2]
    assert report.skipped_rows == 1


def test_a_sample_logged_twice_is_a_bad_row_named_with_its_first(tmp_path):
    """A log written again onto its own end held every sample twice, and each counted twice in the history's spread
    and a report's counts without a word (a hostile-input round). The sample number, where a log has one, says so;
    other epochs, other prompts and other sample numbers are no repeats."""
    rows = [{"prompt_id": "q1", "sample": 0, "epoch": 0, "response_tokens": 10},
            {"prompt_id": "q1", "sample": 1, "epoch": 0, "response_tokens": 12},
            {"prompt_id": "q1", "sample": 0, "epoch": 1, "response_tokens": 11},
            {"prompt_id": "q2", "sample": 0, "epoch": 0, "response_tokens": 30}]
    path = write_jsonl(tmp_path / "log.jsonl", rows + rows[:2])
    with pytest.raises(InputError, match=re.escape(
            "log.jsonl:5: prompt id 'q1' sample 0 of epoch 0 again, of the same length (column 'sample'; first at line "
            "1), 2 such repeats in all: the same samples logged twice would count twice; keep each once, or pass "
            "--on-bad-row skip to keep the first of each")):
        read_lengths([path])
    frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
    assert frame["response_tokens"].to_list() == [10, 12, 11, 30] and report.skipped_rows == 2
    assert report.skipped_examples[0].endswith("log.jsonl:5")
    assert read_lengths([write_jsonl(tmp_path / "ok.jsonl", rows)])[0].height == 4
    # A sample number again with another length is another sample: several epochs logged without an epoch column
    # (a review: they were refused as "logged twice", and with --on-bad-row skip the later epochs dropped).
    epochs = [{k: v for k, v in r.items() if k != "epoch"} for r in rows[:2]]
    frame, report = read_lengths([write_jsonl(tmp_path / "epochs.jsonl", epochs + [{**r, "response_tokens": 99}
                                                                                    for r in epochs])])
    assert frame.height == 4 and report.notes == [
        f"{tmp_path / 'epochs.jsonl'}: 4 rows share a prompt id and sample number (column 'sample') with other lengths: "
        "read as samples of their own; if they are several epochs' (a log without an epoch column), observe each "
        "epoch's log with --epoch"]


@pytest.mark.parametrize("sample", ["the same text", None])
def test_a_sample_column_that_numbers_nothing_is_not_read_as_repeats(tmp_path, sample):
    """Greedy decoding repeats a response's text; a column of that name holding text, or nothing, numbers no sample."""
    rows = [{"prompt_id": "q1", "sample": sample, "response_tokens": 5}] * 2
    assert read_lengths([write_jsonl(tmp_path / "log.jsonl", rows)])[0].height == 2


def test_a_sample_number_written_as_text_or_a_number_is_the_same_sample(tmp_path):
    path = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "q1", "sample": "1", "response_tokens": 5},
                                                {"prompt_id": "q1", "sample": 1, "response_tokens": 5}])
    with pytest.raises(InputError, match=re.escape("log.jsonl:2: prompt id 'q1' sample 1 again")):
        read_lengths([path])


def test_length_files_of_empty_lists_say_so_naming_the_file(tmp_path):
    """It said "no usable lengths left after skipping bad rows" though no row was bad or skipped."""
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": []}, {"id": "b", "length": []}])
    with pytest.raises(InputError, match=re.escape("h.jsonl: the files hold no lengths (every row's list of lengths "
                                                   "is empty); give at least one length")):
        read_lengths([path])


def test_length_files_left_empty_by_skipping_count_the_rows_skipped_in_the_singular(tmp_path):
    """"after skipping 1 bad rows" read so; the count says its noun as every other count does."""
    path = tmp_path / "h.jsonl"
    path.write_text('{"id": "a", "length": -3}\n')
    with pytest.raises(InputError, match=re.escape("h.jsonl: no usable lengths left after skipping 1 bad row; fix")):
        read_lengths([path], ReadOptions(on_bad_row="skip"))


def test_csv_ids_stay_text_with_their_leading_zeros(tmp_path):
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / "p.csv"
    path.write_text("id,prompt\n001,hello there\n01,how are you\n1,what now\n")
    expected = ["001", "01", "1"]  # three ids, none a duplicate of another
    assert read_prompts([path])[0]["prompt_id"].to_list() == expected
    assert read_prompts_streamed([path], batch_bytes=16)[0]["prompt_id"].to_list() == expected
    renamed = tmp_path / "q.csv"
    renamed.write_text("key,prompt\n007,a\n7,b\n")
    assert read_prompts([renamed], ReadOptions(id_key="key"))[0]["prompt_id"].to_list() == ["007", "7"]
    lengths = tmp_path / "h.csv"
    lengths.write_text("uid,response_tokens\n007,5\n7,6\n")
    frame, _ = read_lengths([lengths])
    assert frame["prompt_id"].to_list() == ["007", "7"] and frame["response_tokens"].to_list() == [5, 6]


def test_dictionary_encoded_parquet_text_is_text(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "cat.parquet"
    pq.write_table(pa.table({"id": pa.array(["a", "b", "c"]).dictionary_encode(),
                             "question": pa.array(["q one", "q two", "q one"]).dictionary_encode()}), path)
    frame, _ = read_prompts([path])
    assert frame["prompt_id"].to_list() == ["a", "b", "c"]
    assert frame["prompt_text"].to_list() == ["q one", "q two", "q one"]


def test_an_exact_column_name_wins_over_another_case(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": f"a{i}", "ID": f"X{i}", "prompt": "q"} for i in range(3)])
    frame, _ = read_prompts([path])
    assert frame["prompt_id"].to_list() == ["a0", "a1", "a2"]


@pytest.mark.parametrize("separator", [";", "\t"])
def test_csv_with_a_semicolon_or_tab_separator(tmp_path, separator):
    path = tmp_path / "p.csv"
    path.write_text(f"id{separator}question\na{separator}What is 2+2?\nb{separator}Prove it, please.\n")
    frame, _ = read_prompts([path])
    assert frame["prompt_id"].to_list() == ["a", "b"]
    assert frame["prompt_text"].to_list() == ["What is 2+2?", "Prove it, please."]


def test_truncated_flags_must_match_the_lengths_one_to_one(tmp_path):
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "length": [1, 2], "truncated": [True, False]},
                                             {"id": "b", "length": [5, 6], "truncated": [True]},
                                             {"id": "c", "length": [7], "truncated": [True]}])
    with pytest.raises(InputError, match=r"h\.jsonl:2: column 'truncated' does not hold one flag per length"):
        read_lengths([path])
    frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
    assert frame["prompt_id"].to_list() == ["a", "a", "c"]
    assert frame["truncated"].to_list() == [True, False, True]
    assert report.skipped_rows == 2  # both samples of the bad row


def test_an_unreadable_truncated_flag_is_a_bad_row(tmp_path):
    path = write_jsonl(tmp_path / "h.jsonl", [{"id": "a", "response_tokens": 3, "truncated": "yes"},
                                             {"id": "b", "response_tokens": 4, "truncated": "perhaps"},
                                             {"id": "c", "response_tokens": 5}])
    with pytest.raises(InputError, match=r"h\.jsonl:2: column 'truncated' is not true or false"):
        read_lengths([path])
    frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
    assert frame["truncated"].to_list() == [True, None] and report.skipped_rows == 1


@pytest.mark.parametrize("data", [b'null\n{"id": "a", "prompt": "x"}\n', b' null\r\n{"id": "a", "prompt": "x"}\n',
                                  b'{"id": "a", "prompt": "x"}\nnull\n'])
def test_a_null_line_is_a_bad_row_not_a_crash(tmp_path, data):
    """PyArrow's JSON reader crashed the process (SIGSEGV, exit 139) on a block that begins with a null line."""
    import subprocess
    import sys

    path = tmp_path / "n.jsonl"
    path.write_bytes(data)
    code = ("import sys; from asp_cli.reading import read_prompts, ReadOptions\n"
            "from asp_cli.errors import InputError\n"
            "try:\n    read_prompts([sys.argv[1]], ReadOptions())\nexcept InputError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = 1 if data.lstrip().startswith(b"null") else 2
    assert f"n.jsonl:{line}: expected a JSON object, found null" in done.stdout


def test_a_length_file_named_twice_is_refused(tmp_path):
    """--history r.jsonl --history r.jsonl counted every sample twice, without a word."""
    path = write_jsonl(tmp_path / "r.jsonl", [{"prompt_id": "a", "response_tokens": 5}])
    with pytest.raises(InputError, match=r"r.jsonl: given twice; name each length file once"):
        read_lengths([path, path])
    (tmp_path / "link.jsonl").symlink_to(path)
    with pytest.raises(InputError, match=r"link.jsonl \(the same file as .*r.jsonl\): given twice"):
        read_lengths([path, tmp_path / "link.jsonl"])


def test_an_enormous_id_is_cut_in_a_length_files_error(tmp_path):
    """An id of 200,000 characters made the error a 200 KB line (duplicate ids were already cut: shown_id)."""
    path = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": "x" * 200_000, "response_tokens": -5}])
    with pytest.raises(InputError) as info:
        read_lengths([path])
    assert len(str(info.value)) < 500 and "(200,000 characters)" in str(info.value)


@pytest.mark.parametrize("data", [b'{"id": "a", "prompt": "x"}{"id": "b", "prompt": "y"}\n',
                                  b'{"id": "a", "prompt": "x"}null\n{"id": "c", "prompt": "z"}\n',
                                  b'{"id": "a", "prompt": "x"}\r{"id": "c", "prompt": "z"}\n',
                                  b'{"id": "a", "prompt": "x"}{"id": "b", "prompt": "y"}\n\n \n'])  # blank lines hid it
def test_two_values_on_one_line_are_a_malformed_line(tmp_path, data):
    """PyArrow took them as two rows: the file was read without a word, or a later line was blamed."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(data)
    with pytest.raises(InputError, match=r"p.jsonl:1: malformed JSON at column \d+ \(Extra data\)"):
        read_prompts([path], ReadOptions())


@pytest.mark.parametrize("name", ["p.jsonl", "p.csv"])
@pytest.mark.parametrize("encoding, wide", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_file_is_named_as_such(tmp_path, name, encoding, wide):
    """It said "not valid UTF-8 (byte 0) ... iconv -f LATIN1", the wrong fix for what Windows tools write; without
    a byte-order mark, UTF-16 of ASCII text is valid UTF-8 and was read with NUL bytes in every name."""
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / name
    text = '{"id": "a", "prompt": "x"}\n' if name.endswith("jsonl") else "id,prompt\na,x\n"
    path.write_bytes(text.encode(encoding))
    words = rf"{name}: the file is {wide}, not UTF-8; .*iconv -f {wide} -t UTF-8"
    with pytest.raises(InputError, match=words):
        read_prompts([path], ReadOptions())
    with pytest.raises(InputError, match=words):
        read_prompts_streamed([path], ReadOptions())


def test_a_binary_file_under_a_text_name_is_not_called_utf16(tmp_path):
    path = tmp_path / "db.csv"
    path.write_bytes(b"SQLite format 3\x00" + bytes(4000) + b"\xff" * 10)
    with pytest.raises(InputError) as info:
        read_prompts([path], ReadOptions())
    assert "UTF-16" not in str(info.value) and "UTF-32" not in str(info.value)


def test_a_csv_with_two_byte_order_marks_keeps_its_id_column(tmp_path):
    """A file converted to UTF-8 twice starts with two marks: its first column was named with the second and
    not found, and the ids became row numbers without a word."""
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / "p.csv"
    path.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbfid,question\na,What is 2+2?\nb,Why?\n")
    frame, _ = read_prompts([path], ReadOptions())
    assert frame["prompt_id"].to_list() == ["a", "b"]
    streamed, _ = read_prompts_streamed([path], ReadOptions())
    assert streamed["prompt_id"].to_list() == ["a", "b"]


def test_a_prompt_file_named_twice_is_refused_as_such(tmp_path):
    """asp schedule p.jsonl p.jsonl said "duplicate prompt id ... make ids unique": the ids are unique, the file is
    named twice. Both readers (whole and streamed) say that, a second name of the same file included."""
    from asp_cli.reading.stream import read_prompts_streamed

    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "hi"}, {"id": "b", "question": "yo"}])
    (tmp_path / "alias.jsonl").symlink_to(path)
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=r"p.jsonl: given twice; name each prompt file once"):
            read([path, path])
        with pytest.raises(InputError, match=r"alias.jsonl \(the same file as .*p.jsonl\): given twice"):
            read([path, tmp_path / "alias.jsonl"])
    # Without an id column the ids are row numbers over all inputs, unique, and a file named twice was read twice
    # in silence, every prompt trained twice (a hostile-input round): refused alike.
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"question": "hi"}, {"question": "yo"}])
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=r"plain.jsonl: given twice; name each prompt file once"):
            read([plain, plain])
        assert read([plain, path])[0].height == 4  # two files, one without ids: read


def test_a_csv_header_that_opens_with_a_bracket_is_still_csv(tmp_path):
    """Only JSON under a .csv name is refused as mislabelled: a header such as `[id],prompt` is a CSV's."""
    path = tmp_path / "br.csv"
    path.write_text("[id],prompt\n1,hello\n2,world\n")
    frame, _ = read_prompts([path], ReadOptions(id_key="[id]"))
    assert frame["prompt_id"].to_list() == ["1", "2"]


def test_a_ragged_csv_row_deep_in_a_streamed_file_is_named_by_its_line(tmp_path):
    """The streamed reader parses a CSV in batches; the line it names counts from the file's first line."""
    from asp_cli.reading.stream import read_prompts_streamed

    rows = ["id,question"] + [f"{i},q{i}" for i in range(30_000)]  # past the first batch of 10,000 rows
    rows[25_001] = "25000,q,extra"
    path = tmp_path / "big.csv"
    path.write_text("\n".join(rows) + "\n")
    for read in (read_prompts, lambda paths: read_prompts_streamed(paths, batch_bytes=4096)):
        with pytest.raises(InputError, match=r"big.csv:25002: 3 fields where the header has 2"):
            read([path])


def test_a_non_utf8_byte_is_placed_alike_by_both_readers(tmp_path):
    """`asp schedule` (streamed) said byte 5 and `asp probe` (whole file) byte 17 for one Latin-1 byte: an offset
    into different buffers. Both now say its line and its byte within the line, counted from 1."""
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / "l1.csv"
    path.write_bytes(b"id,question\na,caf\xe9\nb,ok\n")
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=r"l1.csv:2: not valid UTF-8 \(byte 6 of the line\)"):
            read([path])


def test_a_csv_line_that_is_not_utf8_is_skipped_with_on_bad_row_skip(tmp_path):
    """As a JSON line that is not UTF-8 is: skipped and counted, taking no row number, by both readers (a
    schedule's rows and export's then agree); without skip it stops, naming the line."""
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / "l1.csv"
    path.write_bytes(b"id,question\na,caf\xe9\nb,ok\nc,fine\n")
    for read in (read_prompts, read_prompts_streamed):
        frame, report = read([path], ReadOptions(on_bad_row="skip"))
        assert frame["prompt_id"].to_list() == ["b", "c"] and frame["row"].to_list() == [0, 1]
        assert report.skipped_rows == 1 and report.skipped_examples[0].endswith("l1.csv:2")
        with pytest.raises(InputError, match=r"l1.csv:2: not valid UTF-8"):
            read([path])


def test_a_lone_surrogate_escape_is_a_bad_row_and_leaves_the_other_rows_as_they_are(tmp_path):
    """One JSON escape of a lone UTF-16 surrogate (no character) made the reader fall back to quoting every text
    value of the file ("\\"What is 2+2?\\""), which changed every prompt's tokens; now it is that row's error
    (exit 3), skippable, and a surrogate pair (an emoji written as escapes) is the character it encodes."""
    from asp_cli.errors import InputError
    from asp_cli.reading import ReadOptions, ReadReport, read_prompts, read_table

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "bad \\ud800 text"}\n{"id": "b", "question": "What is 2+2?"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:1: holds a lone UTF-16 surrogate escape"):
        read_prompts([bad], ReadOptions())
    report = ReadReport()
    frame = read_table(bad, on_bad_row="skip", report=report)
    assert frame["question"].to_list() == ["What is 2+2?"] and report.skipped_rows == 1
    pair = tmp_path / "pair.jsonl"
    pair.write_text('{"id": "a", "question": "smile \\ud83d\\ude00"}\n')
    assert read_table(pair)["question"].to_list() == ["smile \U0001F600"]
    array = tmp_path / "bad.json"
    array.write_text('[{"id": "a", "question": "x \\udfff"}]')
    with pytest.raises(InputError, match=r"bad.json: element 1 of the array holds a lone UTF-16 surrogate"):
        read_table(array)


def test_a_json_object_with_a_key_twice_is_a_bad_row(tmp_path):
    """A hostile-input audit: {"prompt": a, "prompt": b} was read as b without a word (Python keeps the last value,
    PyArrow refuses the file, Polars keeps the first). It is now the row's error, naming the key, skippable in JSON
    lines; nested objects too; in a JSON array the element and its line; a key repeated in different objects, or
    a value that only looks like a key, is no repeat."""
    from asp_cli.errors import InputError
    from asp_cli.reading import ReadOptions, ReadReport, read_lengths, read_prompts, read_table
    from asp_cli.reading.stream import read_prompts_streamed

    bad = tmp_path / "dup.jsonl"
    bad.write_text('{"id": "a", "question": "one"}\n{"id": "b", "question": "x", "question": "y"}\n'
                   '{"id": "c", "question": "z", "meta": {"k": 1, "k": 2}}\n{"id": "d", "question": "\\"question\\": 1"}\n')
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=r'dup.jsonl:2: holds the key "question" twice in one object'):
            read([bad], ReadOptions())
        frame, report = read([bad], ReadOptions(on_bad_row="skip"))
        assert frame["prompt_id"].to_list() == ["a", "d"] and report.skipped_rows == 2
    report = ReadReport()
    assert read_table(bad, on_bad_row="skip", report=report)["question"].to_list() == ["one", '"question": 1']
    lengths = tmp_path / "lengths.jsonl"
    lengths.write_text('{"id": "a", "response_tokens": 5}\n{"id": "a", "response_tokens": 5, "response_tokens": 9}\n')
    with pytest.raises(InputError, match=r'lengths.jsonl:2: holds the key "response_tokens" twice'):
        read_lengths([lengths], ReadOptions())
    array = tmp_path / "dup.json"
    array.write_text('[\n  {"id": "a", "question": "q"},\n  {"id": "b", "question": "r", "meta": {"k": 1}},\n'
                     '  {"id": "c", "question": "s", "meta": {"k": 1, "k": 2}}\n]')
    with pytest.raises(InputError, match=r'dup.json: element 3 \(line 4\) of the array holds the key "k" twice'):
        read_table(array)
    fine = tmp_path / "fine.json"
    fine.write_text('[{"id": "a", "meta": {"k": 1}}, {"id": "b", "meta": {"k": 2}}]')
    assert read_table(fine)["id"].to_list() == ["a", "b"]


def test_json_lines_whose_first_line_is_an_array_name_that_line(tmp_path):
    """A hostile-input audit: such a file was called a JSON array ("rename it to .json"), which renaming would not
    fix; a real array in a .jsonl file, on one line or pretty-printed, is still told to be renamed."""
    from asp_cli.errors import InputError
    from asp_cli.reading import ReadOptions, read_prompts

    lines = tmp_path / "lines.jsonl"
    lines.write_text('[1, 2]\n{"id": "a", "question": "q"}\n')
    with pytest.raises(InputError, match=r"lines.jsonl:1: expected a JSON object, found an array"):
        read_prompts([lines], ReadOptions())
    for text in ('[{"id": "a", "question": "q"}]\n', '[\n {"id": "a", "question": "q"}\n]\n'):
        array = tmp_path / "array.jsonl"
        array.write_text(text)
        with pytest.raises(InputError, match="holds a JSON array, not JSON lines; rename it to .json"):
            read_prompts([array], ReadOptions())


def test_a_csv_header_that_names_a_column_twice_is_refused(tmp_path):
    """A hostile-input audit: the first of two 'question' columns was read silently (Polars renames the second)."""
    from asp_cli.errors import InputError
    from asp_cli.reading import ReadOptions, read_prompts

    path = tmp_path / "dup.csv"
    path.write_text("id,question,question\na,What is 1?,other\n")
    with pytest.raises(InputError, match=r"dup.csv:1: the header names column 'question' twice; rename one"):
        read_prompts([path], ReadOptions())


@pytest.mark.parametrize("kind, compress, tool", [
    ("bzip2", lambda b: __import__("bz2").compress(b), "bunzip2"),
    ("xz", lambda b: __import__("lzma").compress(b), "unxz"),
    ("zstd", lambda b: b"\x28\xb5\x2f\xfd" + b"\x00" * 32, "unzstd"),  # the frame magic is what is read
])
def test_other_compressed_data_under_a_text_name_is_named(tmp_path, kind, compress, tool):
    """An audit: zstd, bzip2 or xz data under a .jsonl name failed as 'not valid UTF-8; re-encode the file'."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(compress(b'{"id": "a", "prompt": "x"}\n'))
    with pytest.raises(InputError) as error:
        read_prompts([path])
    assert str(error.value) == (f"{path}: the name says JSON lines but the file looks like {kind} data; decompress "
                                f"it ({tool}); asp reads plain files and .gz")


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs named pipes")
def test_a_pipe_is_refused_before_any_read(tmp_path):
    """An audit: `asp schedule f.jsonl` on a named pipe blocked in its first read, where Ctrl-C could not stop it."""
    import os

    pipe = tmp_path / "f.jsonl"
    os.mkfifo(pipe)
    with pytest.raises(InputError, match=r"f\.jsonl: is not a regular file \(a pipe or a device\); write it to a file"):
        read_prompts([pipe])
    # a schedule or a timeline too: "no such file" sent people looking for a typo (a hostile-input round)
    from pathlib import Path

    from asp_cli.integrate.timings import read_timeline
    from asp_cli.schedule_format import read_schedule

    for read in (read_schedule, read_timeline):
        for path in (pipe, Path(os.devnull)):
            with pytest.raises(InputError, match=r": is not a regular file \(a pipe or a device\); give the"):
                read(path)


def test_a_json_array_element_that_is_no_object_is_named_in_jsons_words_counting_from_1(tmp_path):
    """An audit: `[{...}, null]` said "element 1 of the array is NoneType" (Python's word, counted from 0)."""
    path = tmp_path / "a.json"
    path.write_text('[{"id": "a", "prompt": "x"}, null]')
    with pytest.raises(InputError, match=r"a\.json: element 2 of the array is null, not an object; fix it"):
        read_prompts([path])


def test_a_csv_header_repeated_as_a_data_row_is_refused_or_skipped(tmp_path):
    """An audit: `cat a.csv b.csv` kept b's header as a data row (id 'id', prompt 'question'), silently. Both readers
    refuse it naming its line (docs/errors.md, E74), or skip and count it with --on-bad-row skip (taking no row
    number); a prompt's quoted text that holds the header's line is no header."""
    from asp_cli.reading.stream import read_prompts_streamed

    path = tmp_path / "cat.csv"
    path.write_bytes(b"id,question\r\na,What is 2+2?\r\n\xef\xbb\xbfid,question\r\nb,Why?\r\n")
    for read in (read_prompts, read_prompts_streamed, lambda p, o=ReadOptions(): read_prompts_streamed(
            p, o, batch_bytes=16)):
        with pytest.raises(InputError, match=r"^.*cat.csv:3: the header line repeats here as a data row \(files "
                                             r"joined with cat\?\); remove the repeated header line, or pass "
                                             r"--on-bad-row skip to skip bad rows$"):
            read([path])
        frame, report = read([path], ReadOptions(on_bad_row="skip"))
        assert frame["prompt_id"].to_list() == ["a", "b"] and frame["row"].to_list() == [0, 1]
        assert report.skipped_rows == 1 and report.skipped_examples[0].endswith("cat.csv:3")
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('id,question\na,"Repeat this line:\nid,question\nplease"\n')
    for read in (read_prompts, read_prompts_streamed):
        assert read([quoted])[0]["prompt_id"].to_list() == ["a"]
    lengths = tmp_path / "h.csv"
    lengths.write_text("prompt_id,response_tokens\na,5\nprompt_id,response_tokens\nb,7\n")
    with pytest.raises(InputError, match=r"h.csv:3: the header line repeats here as a data row"):
        read_lengths([lengths])


def test_a_nested_integer_id_beyond_2_53_beside_fractions_stays_exact(tmp_path):
    """An audit: a dotted --id-key (`extra_info.index`) whose integers of 2**53 or more sit beside fractions was read
    as floats (2**53 + 1 shown as 9007199254740992.0, and 2**53, exact in the file, refused). As a top-level id
    column, such a field is read as the file's text, by every reader; a fraction of 2**53 or more is refused."""
    from asp_cli.reading.stream import read_prompts_streamed

    big = 2**53 + 1
    rows = [{"q": "a", "extra_info": {"index": 3.0}}, {"q": "b", "extra_info": {"index": big}},
            {"q": "c", "extra_info": {"index": 2**53}}, {"q": "d", "extra_info": {"index": -big}}]
    lines = tmp_path / "p.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    array = tmp_path / "p.json"
    array.write_text(json.dumps(rows))
    options = ReadOptions(prompt_key="q", id_key="extra_info.index")
    for read in (read_prompts, read_prompts_streamed):
        for source in (lines, array):
            assert read([source], options)[0]["prompt_id"].to_list() == ["3", str(big), str(2**53), str(-big)]
    rounded = tmp_path / "r.jsonl"
    rounded.write_text('{"q": "a", "extra_info": {"index": 3}}\n'
                       '{"q": "b", "extra_info": {"index": 9007199254740993.0}}\n')
    for read in (read_prompts, read_prompts_streamed):
        with pytest.raises(InputError, match=r"r.jsonl:2: column 'extra_info.index' \(the id\) is the number "
                                             r"9007199254740992(\.0)?, too large to be an exact integer"):
            read([rounded], options)


@pytest.mark.parametrize("args, flag", [
    (["schedule", "P", "-o", "S", "--history-id-key", ""], "--history-id-key"),
    (["simulate", "S0", "--lengths-length-key", ""], "--lengths-length-key"),
    (["observe", "H", "-o", "S", "--dataset", "P", "--dataset-id-key", ""], "--dataset-id-key"),
    (["predictor", "eval", "P", "--lengths", "H", "--lengths-id-key", ""], "--lengths-id-key"),
])
def test_an_empty_column_name_is_refused_as_the_command_names_the_option(tmp_path, args, flag):
    """ReadOptions named its field, not the option: `asp schedule --history-id-key ''` was refused as
    "--length-id-key", which no command has (and `asp observe --dataset-id-key ''` as "--id-key", another one)."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    prompts = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "x"}, {"id": "b", "question": "y"}])
    history = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": "a", "response_tokens": 5}])
    runner = CliRunner()
    made = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s0.parquet"), "-q"])
    assert made.exit_code == 0, made.output
    paths = {"P": prompts, "H": history, "S": tmp_path / "s.parquet", "S0": tmp_path / "s0.parquet"}
    result = runner.invoke(app, [str(paths.get(a, a)) for a in args])
    assert result.exit_code == 4, result.output
    assert result.stderr == f"Error: {flag} must name a column (got '')\n"


@pytest.mark.parametrize("args, flag, files", [
    (["schedule", "P", "-o", "S", "--history-id-key", "uid"], "--history-id-key", "--history"),
    (["predictor", "predict", "P", "-o", "S", "--history-length-key", "n"], "--history-length-key", "--history"),
    (["predictor", "eval", "O", "--lengths-id-key", "uid"], "--lengths-id-key", "--lengths"),
    (["predictor", "fit", "O", "-o", "M", "--history-id-key", "uid"], "--history-id-key", "--history"),
    (["simulate", "S0", "--lengths-length-key", "n"], "--lengths-length-key", "--lengths"),
    (["report", "S0", "--lengths-id-key", "uid"], "--lengths-id-key", "--lengths"),
    (["replay", "S0", "P", "--dry-run", "--lengths-id-key", "uid"], "--lengths-id-key", "--lengths"),
])
def test_a_length_column_option_without_length_files_is_refused(tmp_path, args, flag, files):
    """They did nothing, silently: `asp schedule --history-id-key uid` without --history made a schedule without
    the history, exit 0 (asp observe refuses --dataset-id-key without --dataset)."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    prompts = write_jsonl(tmp_path / "p.jsonl", [{"id": f"q{i}", "question": "x " * i} for i in range(12)])
    observed = write_jsonl(tmp_path / "o.jsonl", [{"id": f"q{i}", "question": "x " * i, "response_tokens": 9 * i + 3}
                                                  for i in range(12)])
    runner = CliRunner()
    made = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s0.parquet"), "-q"])
    assert made.exit_code == 0, made.output
    paths = {"P": prompts, "O": observed, "S": tmp_path / "s.parquet", "S0": tmp_path / "s0.parquet",
             "M": tmp_path / "m.skops"}
    result = runner.invoke(app, [str(paths.get(a, a)) for a in args])
    assert result.exit_code == 4, result.output
    assert result.stderr == (f"Error: {flag} names a column of the {files} files, but none is given; give them with "
                             f"{files}, or drop {flag}\n")
    assert not (tmp_path / "s.parquet").exists() and not (tmp_path / "m.skops").exists()


def test_ids_repeating_in_a_named_column_say_to_leave_the_column_out(tmp_path):
    """A newcomer named verl's extra_info.index with --id-key, as the README says of verl's datasets, on a file
    joining sources, each with its own index, and was told to pass --id-key."""
    from asp_cli.errors import InputError
    from asp_cli.reading import read_prompts
    from asp_cli.reading.options import ReadOptions

    path = tmp_path / "joined.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"q{s}{i}", "extra_info": {"index": i}}) + "\n"
                            for s in range(2) for i in range(3)))
    with pytest.raises(InputError, match=r"3 ids repeat\. Make ids unique, or pass another --id-key than "
                                         r"'extra_info\.index', or leave --id-key out to read an id column of a "
                                         r"common name \(id, prompt_id, uid, \.\.\.\) where there is one, else to number the rows"):
        read_prompts([path], ReadOptions(id_key="extra_info.index"))


def test_latest_epochs_keeps_the_historys_last_epochs_and_refuses_rows_without_one(tmp_path):
    """`asp schedule --history-epochs N`: a policy whose lengths grew 1.4x an epoch had its third epoch predicted at
    0.68x, every epoch of history weighed alike (a newcomer's three-epoch run)."""
    from asp_cli.errors import SettingsError
    from asp_cli.reading.lengths import latest_epochs

    rows = [{"prompt_id": "a", "response_tokens": 100 * (e + 1), "epoch": e} for e in range(3)]
    path = write_jsonl(tmp_path / "h.jsonl", rows)
    frame, _ = read_lengths([path])
    assert latest_epochs(frame, 1, [path])["response_tokens"].to_list() == [300]
    assert latest_epochs(frame, 2, [path])["response_tokens"].to_list() == [200, 300]
    assert latest_epochs(frame, 9, [path]).height == 3
    with pytest.raises(SettingsError, match="--history-epochs must be at least 1"):
        latest_epochs(frame, 0, [path])
    # A probe observed before training (no epoch) beside the epochs' logs is epoch -1: an OpenRLHF newcomer's
    # `--history-epochs 1` was refused there.
    probed = write_jsonl(tmp_path / "u.jsonl", [*rows, {"prompt_id": "b", "response_tokens": 5}])
    frame = read_lengths([probed])[0]
    assert latest_epochs(frame, 1, [probed])["response_tokens"].to_list() == [300]
    assert latest_epochs(frame, 3, [probed])["response_tokens"].to_list() == [100, 200, 300]
    assert sorted(latest_epochs(frame, 4, [probed])["response_tokens"].to_list()) == [5, 100, 200, 300]
    only = write_jsonl(tmp_path / "o.jsonl", [{"prompt_id": "b", "response_tokens": 5}])
    with pytest.raises(SettingsError, match=r"no sample of .*o.jsonl says its epoch, so the latest cannot be told; "
                                            r"observe each log with --epoch E"):
        latest_epochs(read_lengths([only])[0], 1, [only])


def test_history_epochs_from_python_is_a_whole_number_checked_before_the_history_is_read(tmp_path):
    """A library newcomer's round: `schedule(..., history_epochs="1")` was a TypeError from a comparison deep in the
    history's reading, True was taken as 1, and np.int64(1) worked only by chance."""
    import numpy as np

    import asp_cli
    from asp_cli.errors import SettingsError

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(4))
    history = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": f"p{i}", "response_tokens": 10 * (e + 1), "epoch": e}
                                                 for i in range(4) for e in range(2)])
    for value in ("1", True, 1.5):
        with pytest.raises(SettingsError, match=re.escape(f"--history-epochs must be a whole number of epochs, at "
                                                          f"least 1 (got {value!r}); leave it out to use every epoch")):
            asp_cli.schedule(prompts, None, history=tmp_path / "not-read-yet.jsonl", history_epochs=value)
    made = asp_cli.schedule(prompts, None, history=history, history_epochs=np.int64(1))
    assert made.metadata == asp_cli.schedule(prompts, None, history=history, history_epochs=1).metadata


def test_a_tokenizer_that_is_not_a_path_is_a_settings_error():
    """`ReadOptions(tokenizer=5)` was a TypeError from pathlib (a library newcomer's round)."""
    from pathlib import Path

    from asp_cli.errors import SettingsError

    with pytest.raises(SettingsError, match=re.escape("tokenizer must be a path (text or a pathlib.Path), got int '5'")):
        ReadOptions(tokenizer=5)
    assert ReadOptions(tokenizer="t.json").tokenizer == Path("t.json")


def test_a_twin_takes_one_path_as_well_as_a_list(tmp_path):
    """`asp_cli.reading.options.paths_of`: A Python user's `schedule("p.jsonl")` read the files "p", ".", "j"... and `schedule(Path(...))` was a TypeError;
    `simulate_file(s, "log.jsonl")` said "l: given twice"."""
    from pathlib import Path

    import asp_cli
    from asp_cli.errors import SettingsError
    from util import SAMPLE_PROMPTS

    one = asp_cli.schedule(str(SAMPLE_PROMPTS), tmp_path / "a.parquet")
    listed = asp_cli.schedule([SAMPLE_PROMPTS], tmp_path / "b.parquet")
    assert one.frame.equals(listed.frame) and asp_cli.schedule(Path(SAMPLE_PROMPTS), None).frame.equals(listed.frame)
    log = tmp_path / "log.jsonl"
    log.write_text(f'{{"prompt_id": "{one.frame["prompt_id"][0]}", "response_tokens": 50}}\n', encoding="utf-8")
    assert asp_cli.simulate_file(tmp_path / "a.parquet", str(log)).document == \
        asp_cli.simulate_file(tmp_path / "a.parquet", [log]).document
    assert asp_cli.observe(str(log)).history.height == 1
    with pytest.raises(SettingsError, match="expected a path or a list of paths, got int '5'"):
        asp_cli.schedule(5)
    # a frame (a newcomer's schedule(df)): said in one line, with what to do, not the frame's multi-line repr
    import polars as pl

    with pytest.raises(SettingsError, match=r"got a DataFrame; asp reads files: write the frame") as caught:
        asp_cli.schedule(pl.DataFrame({"question": ["a", "b"]}), None)
    assert "\n" not in str(caught.value)


def test_a_twin_takes_any_ordered_iterable_of_paths_and_says_how_to_pass_rows(tmp_path):
    """A library newcomer's round: `schedule(Path("data").glob("*.jsonl"))` (a generator) was refused as not "a path
    or a list of paths"; `schedule([{"id": ..., "prompt": ...}, ...])` was told the same, without what to do; a set of
    paths, whose order would change the schedule from run to run, is refused saying so."""
    import asp_cli
    from asp_cli.errors import SettingsError
    from asp_cli.reading.options import paths_of

    rows = make_prompts(5)
    a, b = write_jsonl(tmp_path / "a.jsonl", rows[:3]), write_jsonl(tmp_path / "b.jsonl", rows[3:])
    assert paths_of(p for p in (a, b)) == [a, b] == paths_of(iter([str(a), b]))
    assert asp_cli.schedule(sorted(tmp_path.glob("*.jsonl")), None).frame.equals(asp_cli.schedule([a, b], None).frame)
    rows = [{"id": "q1", "prompt": "what is 2+2?"}]
    with pytest.raises(SettingsError, match=re.escape(
            "expected a path or a list of paths, got a list of 1 row; asp reads files: write the rows to one first "
            "(a JSONL file, one json.dumps(row) a line) and pass its path")):
        asp_cli.schedule(rows, None)
    with pytest.raises(SettingsError, match=re.escape("got a set, whose order changes from run to run (and would "
                                                      "change the schedule): pass a list, e.g. sorted(paths)")):
        paths_of({a, b})


def test_a_history_kept_in_memory_is_told_to_be_written_as_a_history_not_as_prompts(tmp_path):
    """A library newcomer's round: `schedule(p, history=observe(log).history)` was told "asp reads prompt files:
    write the frame to one first (frame.write_parquet('prompts.parquet')...)", and `history=observe(log)` got the
    result's multi-line repr cut at 60 characters."""
    import asp_cli
    from asp_cli.errors import SettingsError

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(3))
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p0", "response_tokens": 5}])
    observed = asp_cli.observe(log)
    with pytest.raises(SettingsError, match=re.escape(
            "expected a path or a list of paths, got a DataFrame; asp reads files: write the frame to one first "
            "(frame.write_parquet(PATH), pandas' to_parquet) and pass its path")):
        asp_cli.schedule(prompts, None, history=observed.history)
    with pytest.raises(SettingsError, match=re.escape(
            "expected a path or a list of paths, got an ObserveResult (a result kept in memory); asp reads files: give "
            "the file it wrote (made with an output path; its .output names it)")):
        asp_cli.schedule(prompts, None, history=observed)
    # settings given where files go (simulate_file(s, ReplayOptions(...)), its second argument the lengths)
    with pytest.raises(SettingsError, match=re.escape(
            "expected a path or a list of paths, got a ReplayOptions: settings go by keyword (options=..., "
            "settings=..., read=...)")):
        asp_cli.simulate_file(asp_cli.schedule(prompts), asp_cli.ReplayOptions())


def test_a_list_inside_a_list_of_lengths_is_named_as_such(tmp_path):
    """[[1, 2]] beside [7] was said to be "a list where other rows hold one number" (a hostile-input audit)."""
    nested = write_jsonl(tmp_path / "n.jsonl", [{"id": "a", "response_tokens": [[1, 2]]},
                                                {"id": "b", "response_tokens": [7]}])
    with pytest.raises(InputError, match=r"n.jsonl:1: column 'response_tokens' holds a list inside its list of "
                                         r"lengths \(\[1, 2\]\): each element is one sample's token count"):
        read_lengths([nested])
    # A list of a prompt's samples beside a row of one sample reads as both (a hostile-input round: judged one number
    # a row, the lists were the bad rows, and --on-bad-row skip kept 12 rows of 300); a bad row names its own line.
    mixed = write_jsonl(tmp_path / "m.jsonl", [{"id": "a", "response_tokens": [1, 2]},
                                               {"id": "b", "response_tokens": 7}, {"id": "c", "response_tokens": [3]}])
    frame, _ = read_lengths([mixed])
    assert frame["prompt_id"].to_list() == ["a", "a", "b", "c"] and frame["response_tokens"].to_list() == [1, 2, 7, 3]
    odd = write_jsonl(tmp_path / "o.jsonl", [{"id": "a", "response_tokens": [1, 2]},
                                             {"id": "b", "response_tokens": {"n": 7}}])
    with pytest.raises(InputError, match="o.jsonl:2: column 'response_tokens'"):
        read_lengths([odd])


def test_a_chat_message_without_content_is_named_as_such(tmp_path):
    """A Parquet (or JSON) chat list holding a message whose content is null was called "not text or a chat-message
    list", which it is (a newcomer round): the message names the empty content."""
    import polars as pl

    from asp_cli.errors import InputError
    from asp_cli.reading import read_prompts

    chats = [[{"role": "user", "content": "x"}], [{"role": "system", "content": None}, {"role": "user", "content": "y"}]]
    pl.DataFrame({"id": ["a", "b"], "prompt": chats}).write_parquet(tmp_path / "p.parquet")
    write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "prompt": chats[0]}, {"id": "b", "prompt": chats[1]}])
    for name, where in (("p.parquet", "p.parquet: row 2"), ("p.jsonl", "p.jsonl:2")):
        with pytest.raises(InputError, match=f"{where}: column 'prompt' holds a chat message whose 'content' is "
                                             r"empty \(null\); give every message its text"):
            read_prompts([tmp_path / name])


def test_a_rollout_dump_of_text_given_as_lengths_points_to_observe(tmp_path):
    """verl's, OpenRLHF's or slime's input/output dump (or verl's generation output) as --lengths was told to "name
    the id column with --lengths-id-key", which it has none of (a hostile-input round): it says to observe it."""
    from asp_cli.errors import InputError

    dump = write_jsonl(tmp_path / "dump.jsonl", [{"input": "user: hi\nassistant:", "output": "hello", "score": 1.0}])
    with pytest.raises(InputError, match=r"dump\.jsonl: holds response text without prompt ids .*asp observe "
                                         r".*/dump\.jsonl --dataset PROMPTS -o history\.parquet"):
        read_lengths([dump])
    generated = write_jsonl(tmp_path / "gen.jsonl", [{"prompt": "hi", "responses": ["a", "bb"]}])
    with pytest.raises(InputError, match="holds response text without prompt ids"):
        read_lengths([generated])
    # with an id column it is a length file like any other, whose length column is then looked for
    keyed = write_jsonl(tmp_path / "keyed.jsonl", [{"id": "a", "input": "x", "output": "y", "response_tokens": 3}])
    assert read_lengths([keyed])[0].height == 1
    # verl's v1 trainer dump (input, output, gts, score, step, uid): its uid is a trajectory key, no prompt id, and
    # the dump was told "holds prompts but no response lengths" (a verl newcomer's --history DIR/1.jsonl)
    v1 = write_jsonl(tmp_path / "1.jsonl", [{"input": "user: hi\nassistant:", "output": "hello", "gts": "1",
                                             "score": 1.0, "step": 1, "uid": "0b8e9c1e-1f2a_0_3"}])
    with pytest.raises(InputError, match=r"1\.jsonl: holds response text without prompt ids .*asp observe .*/1\.jsonl"):
        read_lengths([v1])


def test_a_length_file_whose_every_length_is_zero_is_refused_even_beside_good_ones(tmp_path):
    """Only zeros is the wrong column or an empty rollout (E82), said of that file; a zero among other lengths is
    an empty answer, read as one."""
    good, zeros = tmp_path / "good.jsonl", tmp_path / "zeros.jsonl"
    write_jsonl(good, [{"id": "a", "response_tokens": 0}, {"id": "b", "response_tokens": 7}])
    write_jsonl(zeros, [{"id": "a", "num_tokens": 0}, {"id": "b", "num_tokens": 0}])
    frame, _ = read_lengths([good])
    assert frame["response_tokens"].to_list() == [0, 7]
    for paths in ([zeros], [good, zeros]):
        with pytest.raises(InputError, match=re.escape(
                f"{zeros}: every one of the 2 lengths (column 'num_tokens') is 0: the wrong column, or a rollout that "
                "wrote nothing; give response lengths in tokens, naming their column with --history-length-key")):
            read_lengths(paths)


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_a_dotted_key_naming_both_a_column_and_a_nested_field_is_refused(tmp_path, suffix):
    """An audit: `extra_info.index` as a column of its own (a flattened file) beside the struct `extra_info` holding
    `index`: the column won without a word. Read whole, streamed, and as a history's id."""
    from asp_cli.reading.stream import read_prompts_streamed

    rows = [{"prompt": f"q {i}", "extra_info.index": i, "extra_info": {"index": 100 + i}, "response_tokens": 5}
            for i in range(4)]
    path = tmp_path / f"a.{suffix}"
    if suffix == "jsonl":
        write_jsonl(path, rows)
    else:
        pl.DataFrame(rows).write_parquet(path)
    said = rf"a\.{suffix}: 'extra_info\.index' names both a column of that name and a field inside column " \
           r"'extra_info'; rename one of them in the file"
    with pytest.raises(InputError, match=said):
        read_prompts([path], ReadOptions(id_key="extra_info.index"))
    with pytest.raises(InputError, match=said):
        read_prompts_streamed([path], ReadOptions(id_key="extra_info.index"), batch_bytes=64, parquet_batch_rows=2)
    with pytest.raises(InputError, match=said):
        read_lengths([path], ReadOptions(length_id_key="extra_info.index"))


def test_a_dotted_key_not_found_names_the_fields_of_its_object(tmp_path):
    """A slime newcomer's `--id-key metadata.ID` (the field is `id`) listed the top-level columns only."""
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "metadata": {"source": "dapo", "id": "d-1"}}])
    with pytest.raises(InputError, match=r"d\.jsonl: no column 'metadata\.ID' \(from --id-key\); columns are: prompt, "
                                         r"metadata; 'metadata' holds source, id$"):
        read_prompts([path], ReadOptions(id_key="metadata.ID"))


def test_a_source_key_that_is_a_field_of_an_object_names_the_path_to_give(tmp_path):
    """A slime newcomer's `--source-key source`, where slime keeps the source in each row's `metadata` object, was
    listed the top-level columns only (and `--difficulty-key level` likewise)."""
    path = write_jsonl(tmp_path / "s.jsonl", [{"prompt": "q", "metadata": {"source": "dapo", "level": 3}}])
    with pytest.raises(InputError, match=r"s\.jsonl: no column 'source' \(from --source-key\); columns are: prompt, "
                                         r"metadata; 'metadata' holds a field 'source': give --source-key "
                                         r"metadata\.source; name a column every input holds$"):
        read_prompts([path], ReadOptions(source_key="source"))
    with pytest.raises(InputError, match=r"'metadata' holds a field 'level': give --difficulty-key metadata\.level;"):
        read_prompts([path], ReadOptions(difficulty_key="level"))
    with pytest.raises(InputError, match=r"columns are: prompt, metadata; name a column every input holds$"):
        read_prompts([path], ReadOptions(source_key="domain"))  # no such field anywhere: nothing more to say


def test_an_id_found_only_inside_an_object_names_the_path_to_give(tmp_path):
    """A slime newcomer's length log kept each sample's id in its `metadata` object, as slime's samples carry it: the
    error listed the top-level columns and asked for --id-key, without saying which path."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"metadata": {"prompt_id": "7"}, "response_length": 120}])
    with pytest.raises(InputError, match=r"log\.jsonl: no prompt id column found \(looked for .*\); columns are: "
                                         r"metadata, response_length; 'metadata' holds a field 'prompt_id': give "
                                         r"--history-id-key metadata\.prompt_id$"):  # `asp observe`: --id-key
        read_lengths([log])
    assert read_lengths([log], ReadOptions(length_id_key="metadata.prompt_id"))[0].height == 1
    # --prompt-key reads top-level columns only: no path offered there
    data = write_jsonl(tmp_path / "d.jsonl", [{"metadata": {"question": "q"}}])
    with pytest.raises(InputError, match=r"columns are: metadata; name the right one with --prompt-key$"):
        read_prompts([data])


def test_a_dotted_prompt_key_whose_field_is_there_says_the_option_reads_columns_only(tmp_path):
    """A verl newcomer's `--prompt-key extra_info.question` (verl's preprocessing keeps the question there) was told
    "no column 'extra_info.question' ...; 'extra_info' holds question, index": the field it named was listed as
    there, and nothing said that --prompt-key, unlike --id-key, does not read inside an object."""
    path = write_jsonl(tmp_path / "v.jsonl", [{"prompt": [{"role": "user", "content": "q"}],
                                               "extra_info": {"question": "q", "index": 0}}])
    with pytest.raises(InputError, match=r"v\.jsonl: no column 'extra_info\.question' \(from --prompt-key\); columns "
                                         r"are: prompt, extra_info; 'extra_info' holds question, index: --prompt-key "
                                         r"names a column of its own, not a field inside one; give that field a column "
                                         r"of its own first$"):
        read_prompts([path], ReadOptions(prompt_key="extra_info.question"))
    with pytest.raises(InputError, match=r"'extra_info' holds question, index$"):  # a field that is not there
        read_prompts([path], ReadOptions(prompt_key="extra_info.text"))


def test_the_nested_id_hint_names_only_a_field_that_would_serve_as_an_id(tmp_path):
    """A review: the hint named `metadata.id` where every value was null, an object, or repeated (verl's
    extra_info.index in a joined file), each of which --id-key then refused."""
    def hint(ids):
        path = write_jsonl(tmp_path / "h.jsonl", [{"prompt": f"q {k}", "metadata": {"id": i, "source": "s"}}
                                                  for k, i in enumerate(ids)])
        return read_prompts([path])[1].metadata_columns[str(path)].get("id_hint")

    assert hint(["a", "b", "c"]) == "metadata.id" and hint([3, 1, 2]) == "metadata.id"
    assert hint([None, None]) is None and hint(["a", None]) is None
    assert hint([{"x": 1}, {"x": 2}]) is None and hint(["a", "a", "b"]) is None and hint([0.5, 1.5]) is None


def test_a_dotted_key_not_found_names_the_deepest_object_on_its_path(tmp_path):
    from asp_cli.reading.nested import fields_on_path

    frame = pl.DataFrame({"m": [{"sub": {"id": 1, "x": 2}, "k": 3}], "e": [{}], "t": ["text"]})
    assert fields_on_path(frame, "m.sub.ID") == "; 'm.sub' holds id, x"
    assert fields_on_path(frame, "m.ID") == "; 'm' holds sub, k"
    assert fields_on_path(frame, "m.k.deeper") == "; 'm' holds sub, k"
    assert fields_on_path(frame, "t.id") == "" and fields_on_path(frame, "zz.id") == "" and fields_on_path(frame, "m") == ""
    wide = pl.DataFrame({"w": [{f"f{i}": i for i in range(12)}]})
    assert fields_on_path(wide, "w.x") == "; 'w' holds f0, f1, f2, f3, f4, f5, f6, f7, ..."


def test_a_source_column_literally_named_like_a_nested_one_is_read_as_before(tmp_path):
    """A review: no key named, a column `metadata.source` beside `metadata: {source}` was refused (E83), which is
    for keys the user names; it was read as the source before."""
    path = write_jsonl(tmp_path / "s.jsonl", [{"prompt": "q", "id": "a", "metadata.source": "x",
                                               "metadata": {"source": "y"}}])
    assert read_prompts([path])[0]["data_source"].to_list() == ["x"]


def test_the_nested_id_hint_is_given_for_one_file_only(tmp_path):
    """An agent newcomer's two verl files, each numbering its own `extra_info.index` from 0: the hint named it,
    unique in each file, and `--id-key extra_info.index` then refused the repeats across them (exit 3)."""
    from asp_cli.reading.history_ids import id_hints, row_numbered

    paths = [write_jsonl(tmp_path / f"{name}.jsonl", [{"prompt": f"{name} {k}", "extra_info": {"index": k}}
                                                      for k in range(4)]) for name in ("math", "search")]
    one = read_prompts(paths[:1])[1]
    assert row_numbered(one) == (["math.jsonl"], "extra_info.index")
    assert id_hints(one)[str(paths[0])]["id_hint"] == "extra_info.index"
    both = read_prompts(paths)[1]
    assert row_numbered(both) == (["math.jsonl", "search.jsonl"], None)
    assert not any("id_hint" in used for used in id_hints(both).values())


def test_a_row_naming_its_prompt_under_another_key_is_told_so(tmp_path):
    """A pipeline newcomer's file mixed `question` and `prompt` rows: the error called the row's prompt missing and
    nothing more."""
    path = write_jsonl(tmp_path / "mix.jsonl", [{"id": "a", "question": "q1"}, {"id": "b", "prompt": "q2"},
                                                {"id": "c", "prompt": "q3"}])
    with pytest.raises(InputError, match=r"mix\.jsonl:1: column 'prompt' is not text or a chat-message list \(or is "
                                         r"missing\); this row has 'question' instead, as other rows have 'prompt': "
                                         r"give every row one prompt key; fix the row"):
        read_prompts([path])
    broken = write_jsonl(tmp_path / "b.jsonl", [{"id": "a", "prompt": 5}, {"id": "b", "prompt": "q2"}])
    with pytest.raises(InputError) as caught:
        read_prompts([broken])
    assert "instead" not in str(caught.value)


def test_an_id_repeated_by_a_file_without_ids_names_that_file(tmp_path):
    """A pipeline newcomer joined a file with ids and one without: its row-number ids repeated the other's, and the
    message's fix (--id-key) had no column to name in that file."""
    from asp_cli.reading.stream import read_prompts_streamed

    named = write_jsonl(tmp_path / "withid.jsonl", [{"id": "1", "prompt": "a"}, {"id": "2", "prompt": "b"}])
    plain = write_jsonl(tmp_path / "noid.jsonl", [{"prompt": p} for p in "cde"])
    said = (r"duplicate prompt id '2' \(\S*withid\.jsonl:2, \S*noid\.jsonl:1\): noid\.jsonl has no id column, so its "
            r"ids are row numbers, and another file's ids repeat them; give it an id column")
    with pytest.raises(InputError, match=said):
        read_prompts([named, plain])
    with pytest.raises(InputError, match=said):
        read_prompts_streamed([named, plain])


def test_a_log_in_two_histories_counts_once_and_a_copy_is_said(tmp_path):
    """A hostile-input round: histories A (logs 1, 2) and B (logs 2, 3) given together counted log 2's samples
    twice, a byte-identical copy of a history or of a log counted every sample twice, in silence. A copy is said,
    not refused: two logs can hold the same bytes (greedy decoding), and then both count (a review)."""
    import shutil

    from asp_cli.integrate.observe import observe

    logs = [write_jsonl(tmp_path / f"log{i}.jsonl", [{"prompt_id": f"p{i}{k}", "response_tokens": 100 * i + k}
                                                      for k in range(3)]) for i in (1, 2, 3)]
    observe(logs[:2], tmp_path / "a.parquet")
    observe(logs[1:], tmp_path / "b.parquet")
    frame, report = read_lengths([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    assert frame.height == 9 and sorted(frame["prompt_id"].to_list()) == sorted(f"p{i}{k}" for i in (1, 2, 3)
                                                                                  for k in range(3))
    assert report.notes == [f"{tmp_path / 'b.parquet'}: its samples of log2.jsonl are in {tmp_path / 'a.parquet'} "
                            "already (the same log, observed into both histories); left out here, so that none "
                            "counts twice"]
    shutil.copy(tmp_path / "a.parquet", tmp_path / "a-copy.parquet")
    frame, report = read_lengths([tmp_path / "a.parquet", tmp_path / "a-copy.parquet"])
    assert frame.height == 6  # its logs are a's: left out, said once
    assert report.notes == [f"{tmp_path / 'a-copy.parquet'}: its samples of log1.jsonl, log2.jsonl are in "
                            f"{tmp_path / 'a.parquet'} already (the same log, observed into both histories); left out "
                            "here, so that none counts twice"]
    (tmp_path / "copy.jsonl").write_bytes(logs[0].read_bytes())
    frame, report = read_lengths([logs[0], tmp_path / "copy.jsonl"])
    assert frame.height == 6 and report.notes == [f"{tmp_path / 'copy.jsonl'}: holds the same bytes as {logs[0]}: if "
                                                  "it is the same log given again, each of its samples counts twice; "
                                                  "give it once"]
    frame, report = read_lengths([logs[1], tmp_path / "a.parquet"])
    assert frame.height == 9 and report.notes == [f"{logs[1]}: holds the same bytes as a log {tmp_path / 'a.parquet'} "
                                                  "lists: if it is the same log given again, each of its samples "
                                                  "counts twice; give it once"]
    assert not read_lengths([logs[2], tmp_path / "a.parquet"])[1].notes  # another log beside it: as before


def test_a_shared_log_whose_name_other_logs_share_is_kept_whole(tmp_path):
    """A review: rows name their log by file name only, and each epoch's log may be gen.jsonl; leaving the shared
    one out by name dropped another epoch's samples (16,000 read as 8,000)."""
    from asp_cli.integrate.observe import observe

    (tmp_path / "e0").mkdir()
    (tmp_path / "e1").mkdir()
    e0 = write_jsonl(tmp_path / "e0" / "gen.jsonl", [{"prompt_id": f"p{k}", "response_tokens": 10 + k} for k in range(4)])
    e1 = write_jsonl(tmp_path / "e1" / "gen.jsonl", [{"prompt_id": f"p{k}", "response_tokens": 50 + k} for k in range(4)])
    observe([e0], tmp_path / "a.parquet", epoch=0)
    observe([e0], tmp_path / "b.parquet", epoch=0)
    observe([e1], tmp_path / "b.parquet", epoch=1, append=True)
    frame, report = read_lengths([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    assert frame.height == 12 and frame.filter(pl.col("epoch") == 1).height == 4
    assert len(report.notes) == 1 and "under a name other logs of it share, so its samples count twice" in report.notes[0]
    # The same log observed as another epoch is another observation: kept, unsaid.
    observe([e0], tmp_path / "c.parquet", epoch=3)
    frame, report = read_lengths([tmp_path / "a.parquet", tmp_path / "c.parquet"])
    assert frame.height == 8 and not report.notes


def test_gzip_data_followed_by_other_bytes_is_said_so(tmp_path):
    """A hostile-input round: whole gzip data with a line appended was called not gzip at all, with advice to drop
    the .gz suffix. Said so now, whether read a batch at a time (prompts) or whole (lengths)."""
    from asp_cli.reading import read_prompts

    prompts = tmp_path / "p.jsonl.gz"
    prompts.write_bytes(gzip.compress(b'{"id": "a", "question": "q"}\n') + b"garbage\n")
    lengths = tmp_path / "l.jsonl.gz"
    lengths.write_bytes(gzip.compress(b'{"prompt_id": "a", "response_tokens": 5}\n') + b"garbage\n")
    said = "after its gzip data the file holds more bytes that are not gzip (appended to it?); cut them off"
    with pytest.raises(InputError, match=re.escape(f"{prompts}: {said}")):
        read_prompts([prompts])
    with pytest.raises(InputError, match=re.escape(f"{lengths}: {said}")):
        read_lengths([lengths])
    # Not gzip at all, NUL bytes first: not gzip, as before (a review: told of bytes after its gzip data).
    lengths.write_bytes(b"\0\0\0not gzip\n")
    with pytest.raises(InputError, match=re.escape(f"{lengths}: not a valid gzip file")):
        read_lengths([lengths])
    # Two whole members, NUL padding between, still read.
    prompts.write_bytes(gzip.compress(b'{"id": "a", "question": "q"}\n') + b"\0" * 8
                        + gzip.compress(b'{"id": "b", "question": "r"}\n'))
    assert read_prompts([prompts])[0].height == 2


def test_a_length_column_of_true_or_objects_names_its_first_row(tmp_path):
    """A hostile-input round: a length column of true only, or of objects, was said as its Polars type ("holds
    Boolean", "holds Struct({'n': Int64})") without a line, where one true among numbers names its line (E18)."""
    flags = write_jsonl(tmp_path / "b.jsonl", [{"prompt_id": "a", "response_tokens": True},
                                               {"prompt_id": "b", "response_tokens": True}])
    with pytest.raises(InputError) as caught:
        read_lengths([flags])
    assert str(caught.value) == (f"{flags}:1: column 'response_tokens' holds true, not a token count for prompt id "
                                 "'a'; every value of it is true or false: give response lengths in tokens, or name "
                                 "the length column")
    objects = write_jsonl(tmp_path / "o.jsonl", [{"prompt_id": "a", "response_tokens": {"n": 5}}])
    with pytest.raises(InputError, match=re.escape(f"{objects}:1: column 'response_tokens' holds {{\"n\": 5}}, not a "
                                                   "token count for prompt id 'a'; every value of it is an object")):
        read_lengths([objects])


def test_old_mac_line_endings_are_named(tmp_path):
    """Lines ended by a carriage return alone were one line of "extra data" (a hostile-input round)."""
    path = tmp_path / "cr.jsonl"
    path.write_bytes(b'{"id": "a", "question": "q"}\r{"id": "b", "question": "r"}\r')
    with pytest.raises(InputError, match=re.escape("cr.jsonl:1: malformed JSON at column 30 (Extra data); its lines "
                                                   "end in a carriage return alone (old Mac line endings): convert "
                                                   "them to newlines (tr '\\r' '\\n')")):
        read_prompts([path])


def test_old_mac_line_endings_of_a_csv_are_named(tmp_path):
    """A CSV of lines ended by a carriage return alone read as a header and no rows: "the file has a header but no
    rows" (a hostile-input round), where the JSON-lines reader names the line endings. A carriage return inside a
    quoted value, and Windows line endings, are read as before."""
    said = ("its lines end in a carriage return alone (old Mac line endings), so the whole file reads as one header "
            "line: convert them to newlines (tr '\\r' '\\n')")
    lengths = tmp_path / "cr.csv"
    lengths.write_bytes(b"prompt_id,response_tokens\ra,5\r")
    with pytest.raises(InputError, match=re.escape(f"{lengths}: {said}")):
        read_lengths([lengths])
    prompts = tmp_path / "crp.csv"
    prompts.write_bytes(b"id,question\ra,What is 2+2?\rb,Why?\r")
    for read in (read_prompts, read_table):
        with pytest.raises(InputError, match=re.escape(said)):
            read([prompts]) if read is read_prompts else read(prompts)
    quoted = tmp_path / "quoted.csv"
    quoted.write_bytes(b'id,question\na,"What\ris 2+2?"\r\nb,Why?\r\n')
    assert read_prompts([quoted])[0].height == 2


def test_a_numeric_truncated_flag_is_1_or_0_and_any_other_number_a_bad_row(tmp_path):
    """A hostile-input round (2026-12-07): a `truncated` of 5, 1.5 or NaN (a float column from pandas) read as true,
    a censored sample, where the text "5" was refused as not true or false."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "response_tokens": [3, 4, 5],
                             "truncated": pa.array([1.0, 0.0, None])}), good)
    frame, _ = read_lengths([good])
    assert frame["truncated"].to_list() == [True, False, None]
    for value in (5.0, 1.5, float("nan"), -1.0):
        bad = tmp_path / "bad.parquet"
        pq.write_table(pa.table({"id": ["a", "b"], "response_tokens": [3, 4], "truncated": pa.array([1.0, value])}),
                       bad)
        with pytest.raises(InputError, match=r"bad\.parquet: row 2: column 'truncated' is not true or false"):
            read_lengths([bad])
        frame, report = read_lengths([bad], ReadOptions(on_bad_row="skip"))
        assert frame["truncated"].to_list() == [True] and report.skipped_rows == 1
    listed = write_jsonl(tmp_path / "l.jsonl", [{"id": "a", "length": [1, 2], "truncated": [1, 0]}])
    assert read_lengths([listed])[0]["truncated"].to_list() == [True, False]


def test_a_flag_in_a_list_of_truncated_flags_follows_the_single_flags_rule(tmp_path):
    """A list's `[5, 0]` read the 5 as "unknown" in silence, where a single flag of 5 is a bad row: each element is
    now judged as a single flag is, a bad sample (refused, or skipped and counted with --on-bad-row skip), as an
    unreadable length in a list of lengths is; a null element stays unknown."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": "a", "length": [1, 2], "truncated": [5, 0]}, {"id": "b", "length": [3, 4], "truncated": [1, None]}]
    for path, said in [(write_jsonl(tmp_path / "h.jsonl", rows), "h.jsonl:1: column 'truncated' holds 5 in its"),
                       (write_jsonl(tmp_path / "m.jsonl", [*rows, {"id": "c", "length": [5], "truncated": [True]}]),
                        "m.jsonl:1: column 'truncated' holds 5 in its"),  # beside true: read as text
                       (write_jsonl(tmp_path / "t.jsonl", [{**rows[0], "truncated": ["maybe", "no"]}, rows[1]]),
                        "t.jsonl:1: column 'truncated' holds 'maybe' in its")]:
        with pytest.raises(InputError, match=re.escape(said) + r" list of flags, not true or false for prompt id 'a'"):
            read_lengths([path])
        frame, report = read_lengths([path], ReadOptions(on_bad_row="skip"))
        assert frame.filter(pl.col("prompt_id") != "c")["truncated"].to_list() == [False, True, None]
        assert frame["response_tokens"].to_list()[:3] == [2, 3, 4] and report.skipped_rows == 1
    table = tmp_path / "h.parquet"
    pq.write_table(pa.table({"id": ["a"], "response_tokens": [[3, 4]], "truncated": pa.array([[1.0, 1.5]])}), table)
    with pytest.raises(InputError, match=r"h\.parquet: row 1: column 'truncated' holds 1\.5 in its list of flags"):
        read_lengths([table])


def test_a_message_listing_the_columns_lists_30_each_cut_short(tmp_path):
    """A hostile-input round (2026-12-07): a file of 5,000 columns made "no prompt column found" a line of 44 KB, a
    column named with 200,000 characters one of 200 KB, and so did --prompt-key given as much."""
    wide = tmp_path / "wide.jsonl"
    wide.write_text(json.dumps({f"col{i}": i for i in range(5000)}) + "\n")
    with pytest.raises(InputError) as caught:
        read_prompts([wide])
    message = str(caught.value)
    assert "columns are: col0, col1," in message and "col29, ... and 4,970 more; name the right one" in message
    assert len(message) < 500
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"k" * 200_000: 1, "other": 2}) + "\n")
    with pytest.raises(InputError) as caught:
        read_prompts([long])
    assert "columns are: " + "k" * 60 + "... (200,000 characters), other;" in str(caught.value)
    assert len(str(caught.value)) < 500
    with pytest.raises(InputError) as caught:
        read_prompts([long], ReadOptions(prompt_key="z" * 100_000))
    assert len(str(caught.value)) < 500 and "(100,000 characters) (from --prompt-key)" in str(caught.value)


def test_an_asp_export_read_as_prompts_is_named_as_one_not_told_to_pass_id_key(tmp_path):
    """An export of several epochs holds each prompt once an epoch: read as a prompt file (`asp schedule`,
    `asp observe --dataset`) it was told E07's "make ids unique, or pass --id-key", which cannot help. It is named as
    an export, as `asp export` names one given as its dataset; one epoch's export beside the file it was made from
    likewise; a file of its own repeated ids keeps E07."""
    from util import make_prompts

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.export import export
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "prompts.jsonl", make_prompts(16))
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2, epochs=2))
    fix = "not the prompt file(s) the schedule was made from; give that file instead (each prompt once, in its own order)"
    for name, fmt in [("e.jsonl", "jsonl"), ("e.parquet", "parquet"), ("v.parquet", "verl")]:
        exported = tmp_path / name
        export(sched, [data], exported, format=fmt)
        with pytest.raises(InputError) as caught:
            read_prompts([exported])
        assert str(caught.value) == f"{exported}: an asp export (its rows repeat each prompt, once an epoch), {fix}"
    one = tmp_path / "one.jsonl"
    export(sched, [data], one, format="jsonl", epoch=0)
    with pytest.raises(InputError) as caught:
        read_prompts([data, one])
    assert str(caught.value) == f"{one}: an asp export (its rows are another file's prompts, reordered), {fix}"
    twice = write_jsonl(tmp_path / "twice.jsonl", make_prompts(4) * 2)
    with pytest.raises(InputError, match=r"^duplicate prompt id 'p0' .*pass --id-key"):
        read_prompts([twice])
    # A dataset without ids: verl's layout keeps the schedule's id in extra_info only, so the export's row numbers
    # were its ids, none repeated, and every prompt was read once an epoch again without a word.
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"question": row["question"]} for row in make_prompts(16)])
    sched = tmp_path / "bare.parquet"
    schedule([bare], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2, epochs=2))
    exported = tmp_path / "vb.parquet"
    export(sched, [bare], exported, format="verl")
    with pytest.raises(InputError) as caught:
        read_prompts([exported])
    assert str(caught.value) == f"{exported}: an asp export (its rows repeat each prompt, once an epoch), {fix}"
    export(sched, [bare], tmp_path / "v0.parquet", format="verl", epoch=0)  # one epoch: each prompt once
    assert read_prompts([tmp_path / "v0.parquet"])[0].height == 16


@pytest.mark.parametrize("column", ["prompt", "question", "Input"])
def test_prompt_text_and_lengths_without_ids_under_any_prompt_column_are_told_e116(tmp_path, column):
    """E116 fired for a column named exactly 'input': the same log with its decoded prompt as 'prompt' or 'question'
    was told E19's "name the right one with --id-key", a column it has none of; and 'Input' was quoted as 'input'."""
    path = write_jsonl(tmp_path / "lens.jsonl", [{column: f"question {i}", "response_length": 10 + i} for i in range(3)])
    with pytest.raises(InputError) as caught:
        read_lengths([path])
    message = str(caught.value)
    assert message.startswith(f"{path}: prompt text ({column!r}) and response lengths without prompt ids: "), message
    assert "--id-key" not in message
    if column.lower() != "input":
        assert f"log each sample's prompt text as 'input' (not {column!r}) and its response text as 'output'" in message


@pytest.mark.parametrize("key, value, why", [("uid", "3f2a9c1e-aaaa_0_{i}", "verl's uid keys a trajectory"),
                                              ("index", "{i}", "an index numbers rows")])
def test_prompt_text_and_lengths_whose_only_id_is_uid_or_index_are_told_e116(tmp_path, key, value, why):
    """A log of prompt text and lengths whose only id-like column is verl's `uid` (a v1 trainer's trajectory key) or
    an `index` read it as the prompt ids, matching none, where E103 takes neither for one: E116, naming the column
    and how to read it as the ids where it is them (--history-id-key)."""
    path = write_jsonl(tmp_path / "lens.jsonl", [{key: value.format(i=i), "prompt": f"question {i}",
                                                  "response_length": 10 + i} for i in range(3)])
    with pytest.raises(InputError) as caught:
        read_lengths([path])
    assert str(caught.value).startswith(
        f"{path}: prompt text ('prompt') and response lengths without prompt ids ({key!r} is read as none: {why}; if "
        f"it is the prompt id, name it with --history-id-key {key}): asp matches"), str(caught.value)
    named = read_lengths([path], ReadOptions(length_id_key=key))[0]
    assert named["prompt_id"].to_list() == [value.format(i=i) for i in range(3)]


def test_a_prompt_text_log_whose_id_is_inside_an_object_is_told_the_path_not_e116(tmp_path):
    """A slime sample dump holds the prompt text, the response length and the id in its `metadata` object: E116 (log
    the response text, or the prompt id) hid E19's path to give, which it has."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt": "2 + 2?", "response_length": 120,
                                                "metadata": {"prompt_id": "7"}}])
    with pytest.raises(InputError, match=r"'metadata' holds a field 'prompt_id': give --history-id-key "
                                         r"metadata\.prompt_id$"):
        read_lengths([log])


def test_a_folder_of_verl_rollout_dumps_and_a_dump_in_one_say_the_command_to_run_on_them(tmp_path):
    """A verl newcomer's round (2026-12-07): `--history rollouts` (verl's trainer.rollout_data_dir) was told to name
    the files in it, whose every file was then refused as text to observe first; and that hint named the dump
    without its folder (`asp observe 1.jsonl`), a command that did not run where it was given."""
    (tmp_path / "rollouts").mkdir()
    for step in (1, 2, 10):
        write_jsonl(tmp_path / "rollouts" / f"{step}.jsonl", [{"input": "user\nq\nassistant\n", "output": "a",
                                                               "score": 1.0, "step": step}])
    with pytest.raises(InputError) as caught:
        read_lengths([tmp_path / "rollouts"])
    assert str(caught.value) == (
        f"{tmp_path / 'rollouts'}: is a folder of 3 verl rollout dumps (1.jsonl to 10.jsonl, one a step, as "
        "trainer.rollout_data_dir holds them: input/output text, no prompt ids); turn them into lengths first: "
        f"asp observe {tmp_path / 'rollouts' / '*.jsonl'} --dataset PROMPTS -o history.parquet, then pass "
        "history.parquet")
    with pytest.raises(InputError, match=re.escape(f"asp observe {tmp_path / 'rollouts' / '2.jsonl'} --dataset")):
        read_lengths([tmp_path / "rollouts" / "2.jsonl"])
    (tmp_path / "other").mkdir()  # a folder of anything else: as before
    with pytest.raises(InputError, match=r"other: is a folder; name the files in it \(e\.g\. .*other/\*\.jsonl\)"):
        read_lengths([tmp_path / "other"])


def test_the_commands_said_for_verl_dumps_quote_a_folder_a_shell_would_split(tmp_path):
    """The E141 and E103 hints give a command to run; a folder named with a space (`my rollouts`) gave
    `asp observe my rollouts/*.jsonl`, two arguments to a shell, neither of them the dumps."""
    folder = tmp_path / "my rollouts"
    folder.mkdir()
    write_jsonl(folder / "1.jsonl", [{"input": "user\nq\nassistant\n", "output": "a", "score": 1.0, "step": 1}])
    with pytest.raises(InputError) as caught:
        read_lengths([folder])
    assert f"asp observe '{folder}'/*.jsonl --dataset PROMPTS" in str(caught.value)
    with pytest.raises(InputError) as caught:
        read_lengths([folder / "1.jsonl"])
    assert f"asp observe '{folder / '1.jsonl'}' --dataset PROMPTS" in str(caught.value)


def test_a_folder_of_verl_dumps_given_as_prompts_is_not_told_to_pass_a_history_there(tmp_path):
    """verl's rollout_data_dir given as the prompts (`asp schedule rollouts`, `asp observe --dataset rollouts`) was
    told E141's lengths line, 'turn them into lengths first ..., then pass history.parquet', as if a history were
    prompts: it says the dumps are the run's outputs and to give the prompt file(s) the run read."""
    (tmp_path / "rollouts").mkdir()
    write_jsonl(tmp_path / "rollouts" / "1.jsonl", [{"input": "user\nq\nassistant\n", "output": "a", "score": 1.0,
                                                     "step": 1}])
    with pytest.raises(InputError) as caught:
        read_prompts([tmp_path / "rollouts"])
    said = str(caught.value)
    assert "then pass history.parquet" not in said
    assert said.endswith("a run's outputs, not prompts; give the prompt file(s) the run read (verl's "
                         "data.train_files), and to feed the dumps back as lengths: asp observe "
                         f"{tmp_path / 'rollouts'}/*.jsonl --dataset PROMPTS -o history.parquet"), said


def test_a_verl_dump_given_as_prompts_is_refused_naming_what_it_is(tmp_path):
    """One of verl's rollout dumps given as the prompts (`asp schedule rollouts/1.jsonl`) was scheduled without a word,
    each sample's text a prompt (8 'prompts' of 2); it is named as the run's outputs, with the command that reads
    it. Naming the prompt column keeps a file of such columns readable as prompts."""
    dump = write_jsonl(tmp_path / "1.jsonl", [{"input": f"user\nq{i % 2}\nassistant\n", "output": "a", "score": 1.0,
                                               "step": 1} for i in range(8)])
    with pytest.raises(InputError) as caught:
        read_prompts([dump])
    assert str(caught.value).startswith(f"{dump}: holds a verl rollout dump's columns (input, output, score, step): a "
                                        "run's outputs, not prompts; give the prompt file(s) the run read"), caught.value
    assert read_prompts([dump], ReadOptions(prompt_key="input"))[0].height == 8
